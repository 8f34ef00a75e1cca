"""One llama.cpp child that may crash or hang (the driver check): run with a deadline in its own session,
stdin closed, output read line by line and bounded, its CPU time sampled while it runs (a child still using
CPU at its deadline is slow, compiling pipelines; one that used none over the last window is hung:
engine/checked_run.py judges); and what its log says about the GPU.

ggml prints `ggml_vulkan: 0 = NAME (DRIVER) | uma: 1 | fp16: 1 | bf16: 0 | warp size: 16 | shared memory:
32768 | int dot: 0 | matrix cores: none` (0.7.0 adds `fp4: 0`), and llama.cpp (with -v) `load_tensors:
Vulkan0 model buffer size = 28.69 MiB`, `llama_kv_cache: Vulkan0 KV buffer size = ...`,
`sched_reserve: Vulkan0 compute buffer size = ...`, `llama_context: Vulkan_Host output buffer size = ...`.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import IO, Any

MAX_LINE = 1000  # characters kept of one line
MAX_KEPT = 200  # lines worth keeping (device lines, buffer sizes, errors)
TAIL = 40
REAP_S = 10.0
MAX_READ = 64 << 20  # beyond this the child's output is drained, not read into lines
SAMPLE_S = 0.25  # how often the child's CPU time is read while it runs
WINDOW_S = 10.0  # the CPU time accrued over this last stretch before the deadline says busy or stalled
MIN_WINDOW_S = 0.5
BUSY_SHARE = 0.05  # at least 5 % of one CPU over the window: the child is working (a wait uses ~0)
CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGKILL)
_WORTH = re.compile(
    r"ggml_vulkan:|ggml_opencl:|buffer size|error|failed|exception|abort|assert|terminate", re.I
)
_ERROR = re.compile(r"error|failed|exception|abort|assert|terminate", re.I)
_DEVICE = re.compile(r"^ggml_vulkan:\s*(\d+)\s*=\s*(.*?)\s*\|\s*(uma:.*)$")
_BUFFER = re.compile(
    r"^\s*(?:\w+:)?\s*(\S+)\s+(model|KV|compute|output|RS)\s+buffer size\s*=\s*([\d.]+)\s*MiB"
)


@dataclass
class RunResult:
    returncode: int | None
    signal: str | None  # "SIGSEGV": the child (or, through a wrapper's 128+N status, its child) was killed
    hung: bool  # killed at the deadline
    seconds: float
    kept: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    error_line: str | None = None
    start_error: str | None = None
    cpu_seconds: float | None = None  # CPU time of the child and its process group (None: not readable)
    window_cpu_seconds: float | None = None  # of that, accrued over the last window before it ended
    window_seconds: float | None = None
    stalled: bool = False  # killed early: no CPU time accrued over `stall_s` (run_bounded)

    @property
    def busy(self) -> bool | None:
        """At its end (a deadline, mostly): was the child still using CPU? None when that is unknown."""
        if self.window_cpu_seconds is None or not self.window_seconds:
            return None
        return self.window_cpu_seconds >= BUSY_SHARE * self.window_seconds


class _Reader(threading.Thread):
    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.kept: list[str] = []
        self.tail: deque[str] = deque(maxlen=TAIL)
        self.error_line: str | None = None
        self.read = 0

    def run(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := self.stream.readline(MAX_LINE * 4):
                self.read += len(chunk)
                if self.read > MAX_READ:
                    continue
                line = chunk.decode("utf-8", errors="replace").rstrip()[:MAX_LINE]
                if not line:
                    continue
                self.tail.append(line)
                if _WORTH.search(line) and len(self.kept) < MAX_KEPT:
                    self.kept.append(line)
                if _ERROR.search(line):
                    self.error_line = line


def _signal_name(returncode: int) -> str | None:
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if returncode > 128 and number not in CRASH_SIGNALS:
        return None
    try:
        return signal.Signals(number).name if number > 0 else None
    except ValueError:
        return f"signal {number}"


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def group_cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) of process `pid`, the children it waited for, and every live process of its
    session (a wrapper's child, a compiler it started); None when it cannot be read."""
    try:
        import psutil
    except ImportError:
        return None
    try:
        leader = psutil.Process(pid)
        t = leader.cpu_times()
        total = t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
        for child in leader.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                c = child.cpu_times()
                total += c.user + c.system
    except psutil.Error:
        return None
    return total


class _CpuWatch:
    """Samples of the child's CPU time: (monotonic, cpu seconds)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: deque[tuple[float, float]] = deque(maxlen=4096)
        self.last_at = 0.0

    def sample(self) -> None:
        cpu = group_cpu_seconds(self.pid)
        now = time.monotonic()
        self.last_at = now
        if cpu is not None:
            self.samples.append((now, cpu))

    def accrued(self, window: float) -> tuple[float | None, float | None]:
        """(CPU seconds accrued over the last `window` seconds, the span it covers)."""
        if len(self.samples) < 2:
            return None, None
        end_at, end_cpu = self.samples[-1]
        start_at, start_cpu = self.samples[0]
        for at, cpu in self.samples:
            if at >= end_at - window:
                break
            start_at, start_cpu = at, cpu
        span = end_at - start_at
        return (max(0.0, end_cpu - start_cpu), span) if span > 0 else (None, None)


def run_bounded(
    argv: list[str], deadline: float, env: dict[str, str] | None = None, stall_s: float | None = None
) -> RunResult:
    """Run argv to its end or the deadline (then its whole process group is killed). Never raises.
    stall_s: also end it early once it has used no CPU (below BUSY_SHARE) for that long."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        return RunResult(
            None, None, False, 0.0, start_error=f"could not run {argv[0]}: {exc.strerror or exc}"
        )
    assert proc.stdout is not None
    reader = _Reader(proc.stdout)
    reader.start()
    watch = _CpuWatch(proc.pid)
    hung = stalled = False
    window = max(MIN_WINDOW_S, min(WINDOW_S, deadline / 2))
    try:
        watch.sample()
        while True:
            left = start + deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(argv, deadline)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=min(SAMPLE_S, left))
                break
            watch.sample()
            if stall_s is not None and time.monotonic() - start >= stall_s:
                used, span = watch.accrued(stall_s)
                if used is not None and span and span >= stall_s * 0.9 and used < BUSY_SHARE * span:
                    stalled = True
                    raise subprocess.TimeoutExpired(argv, deadline)
    except subprocess.TimeoutExpired:
        hung = True
        watch.sample()
    finally:
        _kill_group(proc.pid)  # a hung child, or anything it left behind
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=REAP_S)  # a process stuck in the kernel's GPU driver may not die at once
    seconds = time.monotonic() - start
    reader.join(timeout=5.0)
    with contextlib.suppress(OSError):
        proc.stdout.close()
    rc = proc.returncode
    hung = hung or rc is None
    used, span = watch.accrued(stall_s if stalled and stall_s else window)
    total = watch.samples[-1][1] if watch.samples else None
    return RunResult(
        returncode=rc,
        signal=None if hung or rc is None else _signal_name(rc),
        hung=hung,
        seconds=seconds,
        kept=list(reader.kept),
        tail=list(reader.tail),
        error_line=reader.error_line,
        cpu_seconds=total,
        window_cpu_seconds=used,
        window_seconds=span,
        stalled=stalled,
    )


def parse_device_line(line: str) -> dict[str, Any] | None:
    """`ggml_vulkan: 0 = NAME (DRIVER) | uma: 1 | ...` -> {index, name, driver, uma, fp16, warp_size, ...}."""
    m = _DEVICE.match(line.strip())
    if m is None:
        return None
    head = m.group(2)
    driver = re.search(r"\(([^()]*)\)\s*$", head)
    facts: dict[str, Any] = {
        "index": int(m.group(1)),
        "name": head[: driver.start()].strip() if driver else head,
        "driver": driver.group(1) if driver else None,
        "line": line.strip()[:MAX_LINE],
    }
    for part in m.group(3).split("|"):
        key, _, value = part.partition(":")
        key, value = key.strip().replace(" ", "_"), value.strip()
        if not key:
            continue
        if value.isdigit():
            facts[key] = int(value) if key in ("warp_size", "shared_memory") else value == "1"
        elif value in ("true", "false"):
            facts[key] = value == "true"
        else:
            facts[key] = value
    return facts


def parse_facts(lines: list[str], index: int | None = None) -> dict[str, Any]:
    """The device line and buffer sizes a check printed: {device: {...}, buffers: {"Vulkan0 model": bytes}}.
    `index`: ggml's number of the checked device (Vulkan1 -> 1); the first device line otherwise."""
    facts: dict[str, Any] = {}
    buffers: dict[str, int] = {}
    for line in lines:
        device = parse_device_line(line)
        if device is not None:
            if "device" not in facts or (index is not None and device["index"] == index):
                facts["device"] = device
            continue
        m = _BUFFER.match(line)
        if m and not line.lstrip().startswith("~"):
            name = f"{m.group(1)} {m.group(2)}"
            buffers[name] = buffers.get(name, 0) + round(float(m.group(3)) * (1 << 20))
    if buffers:
        facts["buffers"] = buffers
    return facts
