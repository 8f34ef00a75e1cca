"""llama.cpp's own llama-bench as a child process: the bench engine without llama-cpp-python.

One invocation measures a grid (prompt sizes x generation lengths x threads x ubatch x flash attention x
repack) with llama-bench's own warm-up and repetitions; `-o jsonl` prints one JSON object per finished test,
so results (and, with --progress, each repetition) arrive while it runs. Versions differ in what they print:
flash_attn is a bool in older ones and -1/0/1 (auto/off/on) in newer ones, `use_mmap` became `load_mode`,
old ones have no samples lists. parse_record reads all of them into one LlamaBenchRecord.

A CPU set is applied the way pinning.py does it for the in-process engine: the child inherits the affinity of
the thread that starts it (llama-bench's --cpu-mask was a silent no-op on Android until mid-2026).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgepilot.device.process import allowed_cpus
from edgepilot.engine.base import EngineError
from edgepilot.engine.child_env import llama_env
from edgepilot.engine.tool_flags import adapt_args, help_text, known_flags
from edgepilot.errors import UserError
from edgepilot.plan.settings import CPU_DEVICE
from edgepilot.shown import shown

PROGRESS = re.compile(r"llama-bench: benchmark (\d+)/(\d+): (.+)$")
# Lines of llama-bench's --progress that start one unit of work (a warm-up or a repetition).
UNIT = re.compile(r"warmup (?:prompt|generation) run|(?:prompt|generation) run \d+/\d+")
LOG_LINES = 200
MMAP_MODES = {"auto", "mmap", "mmap+mlock"}


@dataclass
class BenchJob:
    """What to measure, as llama-bench's parameters (every list is a dimension of its grid)."""

    model: Path
    n_prompt: list[int]
    n_gen: list[int]
    threads: list[int]
    reps: int = 5
    ubatch: list[int] = field(default_factory=lambda: [512])
    flash_attn: list[bool] = field(default_factory=lambda: [False])
    repack: list[bool] = field(default_factory=lambda: [True])
    n_batch: int = 2048
    type_k: str = "f16"
    type_v: str = "f16"
    device: str = CPU_DEVICE  # llama-bench's -dev: none (the CPU) or one GPU device (Vulkan0)
    gpu_layers: list[int] = field(default_factory=lambda: [0])  # -ngl: layers offloaded to the device
    warmup: bool = True


@dataclass
class LlamaBenchRecord:
    """One result line of llama-bench, read the same from every version."""

    model_type: str
    model_size: int
    model_n_params: int
    n_batch: int
    n_ubatch: int
    n_threads: int
    type_k: str
    type_v: str
    n_gpu_layers: int
    devices: str  # llama-bench's -dev as it reports it: none, auto, Vulkan0 ...
    flash_attn: bool | None  # None: "auto" (llama.cpp decides)
    use_mmap: bool
    repack: bool | None  # None: this llama-bench does not say (older than --repack)
    n_prompt: int
    n_gen: int
    n_depth: int
    test_time: str
    avg_ns: int
    stddev_ns: int
    avg_ts: float
    stddev_ts: float
    samples_ns: list[int]
    samples_ts: list[float]
    build_commit: str = ""
    build_number: int = 0
    cpu_mask: str = "0x0"


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "on", "true", "enabled"):
        return True
    if text in ("0", "off", "false", "disabled"):
        return False
    return None  # -1 / auto


def parse_record(obj: dict[str, Any]) -> LlamaBenchRecord:
    """A record from llama-bench's json/jsonl output; ValueError when a field it always prints is missing."""
    try:
        n_prompt, n_gen = int(obj["n_prompt"]), int(obj["n_gen"])
        avg_ts = float(obj["avg_ts"])
        samples_ts = [float(x) for x in obj.get("samples_ts") or [avg_ts]]
        samples_ns = [int(x) for x in obj.get("samples_ns") or [obj.get("avg_ns", 0)]]
        if "use_mmap" in obj:
            mmap = bool(_flag(obj["use_mmap"]))
        else:
            mmap = str(obj.get("load_mode", "auto")).lower() in MMAP_MODES
        repack = _flag(obj["repack"]) if "repack" in obj else None
        return LlamaBenchRecord(
            model_type=str(obj.get("model_type", "")),
            model_size=int(obj.get("model_size", 0)),
            model_n_params=int(obj.get("model_n_params", 0)),
            n_batch=int(obj["n_batch"]),
            n_ubatch=int(obj.get("n_ubatch", obj["n_batch"])),
            n_threads=int(obj["n_threads"]),
            type_k=str(obj.get("type_k", "f16")),
            type_v=str(obj.get("type_v", "f16")),
            n_gpu_layers=int(obj.get("n_gpu_layers", 0)),
            devices=str(obj.get("devices", "auto"))[:64],
            flash_attn=_flag(obj.get("flash_attn", False)),
            use_mmap=mmap,
            repack=repack,
            n_prompt=n_prompt,
            n_gen=n_gen,
            n_depth=int(obj.get("n_depth", 0)),
            test_time=str(obj.get("test_time", "")),
            avg_ns=int(obj.get("avg_ns", 0)),
            stddev_ns=int(obj.get("stddev_ns", 0)),
            avg_ts=avg_ts,
            stddev_ts=float(obj.get("stddev_ts", 0.0)),
            samples_ns=samples_ns,
            samples_ts=samples_ts,
            build_commit=str(obj.get("build_commit", "")),
            build_number=int(obj.get("build_number", 0) or 0),
            cpu_mask=str(obj.get("cpu_mask", "0x0")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a llama-bench result ({type(exc).__name__}: {exc})") from None


def parse_output(text: str) -> list[LlamaBenchRecord]:
    """llama-bench's `-o json` (one array) or `-o jsonl` (one object a line) output."""
    text = text.strip()
    if not text:
        return []
    if text.startswith("["):
        objects = json.loads(text)
    else:
        objects = [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
    return [parse_record(obj) for obj in objects]


def _csv(values: list[Any]) -> str:
    return ",".join(str(int(v) if isinstance(v, bool) else v) for v in values)


def bench_argv(tool: Path, job: BenchJob) -> list[str]:
    """The command line for this llama-bench, without the flags its version does not know."""
    known = known_flags(tool)
    if job.repack != [True] and known is not None and "--repack" not in known:
        raise UserError(
            f"{tool} has no --repack (an older llama.cpp): measure without --repack/--no-repack, "
            "or install a newer llama.cpp"
        )
    fmt = "jsonl" if "jsonl" in (help_text(tool) or "jsonl") else "json"
    argv = [str(tool), "-m", str(job.model), "-o", fmt, "-r", str(job.reps)]
    argv += ["-p", _csv(job.n_prompt), "-n", _csv(job.n_gen), "-t", _csv(job.threads)]
    argv += ["-b", str(job.n_batch), "-ub", _csv(job.ubatch), "-fa", _csv(job.flash_attn)]
    argv += ["-ctk", job.type_k, "-ctv", job.type_v, "-dev", job.device, "-ngl", _csv(job.gpu_layers)]
    if job.repack != [True]:
        argv += ["--repack", _csv(job.repack)]
    argv += ["--progress"] + ([] if job.warmup else ["--no-warmup"])
    return adapt_args(tool, argv)


@contextlib.contextmanager
def start_on_cpus(cpus: list[int] | tuple[int, ...] | None) -> Iterator[None]:
    """This thread on `cpus` while a child is started: the child inherits it, other threads keep theirs."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = set(allowed_cpus())
    try:
        os.sched_setaffinity(0, set(cpus))
    except OSError as exc:
        raise UserError(f"cannot run llama-bench on CPUs {sorted(cpus)}: {exc.strerror or exc}") from None
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@dataclass
class BenchRun:
    """A finished llama-bench invocation."""

    records: list[LlamaBenchRecord]
    argv: list[str]
    seconds: float
    timed_out: bool = False
    log: list[str] = field(default_factory=list)


def run_llama_bench(
    tool: Path,
    job: BenchJob,
    cpus: list[int] | tuple[int, ...] | None = None,
    on_progress: Callable[[str], None] | None = None,
    on_record: Callable[[LlamaBenchRecord], None] | None = None,
    verbose: bool = False,
    timeout: float | None = None,
) -> BenchRun:
    """Run llama-bench for `job` on `cpus` (None: this process's CPUs). on_progress gets each unit of work
    (a warm-up or a repetition) as it starts, on_record each result as it is printed. With `timeout`, a run
    that takes longer is stopped and returns what it measured so far (timed_out=True)."""
    argv = bench_argv(tool, job)
    env = llama_env(job.device == CPU_DEVICE, tool)
    t0 = time.perf_counter()
    with start_on_cpus(cpus):
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                env=env,
            )
        except OSError as exc:
            raise EngineError(f"cannot start {tool}: {exc.strerror or exc}") from None
    log: deque[str] = deque(maxlen=LOG_LINES)
    expired = threading.Event()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            line = line.rstrip("\n")
            log.append(line)
            if verbose:
                print(shown(line), file=sys.stderr, flush=True)
            m = PROGRESS.search(line)
            if m and on_progress and UNIT.search(m.group(3)):
                on_progress(f"test {m.group(1)}/{m.group(2)}, {m.group(3)}")

    def expire() -> None:
        expired.set()
        with contextlib.suppress(OSError):
            proc.kill()

    reader = threading.Thread(target=read_stderr, name="llama-bench-stderr", daemon=True)
    reader.start()
    timer = threading.Timer(timeout, expire) if timeout else None
    if timer:
        timer.start()
    out: list[str] = []
    records: list[LlamaBenchRecord] = []

    def take(line: str) -> None:
        out.append(line)
        if line.strip().startswith("{") and line.strip().endswith("}"):  # jsonl; json spans lines
            with contextlib.suppress(ValueError):
                record = parse_record(json.loads(line))
                records.append(record)
                if on_record:
                    on_record(record)

    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            take(line)
        rc = proc.wait()
    except KeyboardInterrupt:
        proc.kill()
        for line in proc.stdout:  # results it printed before Ctrl-C are kept (bench keeps finished tests)
            take(line)
        proc.wait()
        raise
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        if timer:
            timer.cancel()
        reader.join(timeout=5)
    seconds = time.perf_counter() - t0
    if expired.is_set():
        return BenchRun(records, argv, seconds, timed_out=True, log=list(log))
    if rc == -signal.SIGINT:  # the terminal's Ctrl-C reached llama-bench too: ours, not its failure
        raise KeyboardInterrupt
    if rc != 0:
        raise EngineError(_failure(tool, rc, list(log)))
    if not records:  # `-o json`: one array at the end
        try:
            records = parse_output("".join(out))
        except (ValueError, json.JSONDecodeError) as exc:
            raise EngineError(f"{tool.name} printed no results that could be read: {exc}") from None
        for record in records:
            if on_record:
                on_record(record)
    if not records:
        tail = f": {log[-1].strip()}" if log else ""
        raise EngineError(f"{tool.name} finished without a result{tail}")
    return BenchRun(records, argv, seconds, log=list(log))


def _failure(tool: Path, rc: int, log: list[str]) -> str:
    if rc < 0:
        what = f"was killed by signal {-rc}" + (" (out of memory?)" if rc == -9 else "")
    else:
        what = f"failed (exit code {rc})"
    reasons = [ln.strip() for ln in log if "error" in ln.lower() or "failed" in ln.lower()]
    last = reasons[-1] if reasons else (log[-1].strip() if log else "")
    return f"{tool.name} {what}" + (f": {last}" if last else "")
