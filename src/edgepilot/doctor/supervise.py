"""`doctor -- CMD`: run the command, stream its output, and record how it ended and what it cost.

Recorded: exit status or signal, wall time, the child's peak RSS (wait4's ru_maxrss), and the device's
available memory, memory pressure (PSI) and hottest temperature just before and just after the run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from edgepilot.device import fs
from edgepilot.device.process import rss_bytes
from edgepilot.doctor.cgroup import MemoryLimit, drop_page_cache
from edgepilot.doctor.evidence import log_keeper, log_lines, signal_name
from edgepilot.doctor.types import DeviceState, RunRecord
from edgepilot.errors import UserError
from edgepilot.program_path import which

SAMPLE_SECONDS = 0.02
QUIET_SECONDS = 5.0  # a child silent this long gets a progress line (a run crawling at a memory limit)


@dataclass
class Progress:
    """How a silent child is doing: shown every QUIET_SECONDS of silence."""

    elapsed_seconds: float
    rss_bytes: int | None
    limit_bytes: int | None
    page_ins_per_second: float | None  # major faults: pages read back from the model file or swap

    def line(self) -> str:
        parts = [f"doctor: {self.elapsed_seconds:.0f} s"]
        if self.rss_bytes is not None:
            rss = f"RSS {self.rss_bytes / 2**20:.0f} MiB"
            if self.limit_bytes:
                rss += f" of {self.limit_bytes / 2**20:.0f} MiB"
            parts.append(rss)
        if self.page_ins_per_second is not None:
            parts.append(f"{self.page_ins_per_second:.0f} page-ins/s")
        return " · ".join(parts)


ProgressSink = Callable[[Progress], None]


def major_faults(pid: int) -> int | None:
    """The process's major page faults so far (/proc/PID/stat field 12), None if unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read(4096).decode("ascii", "replace")
        return int(stat.rsplit(")", 1)[1].split()[9])
    except (OSError, IndexError, ValueError):
        return None


def device_state(root: Path = fs.LIVE_ROOT) -> DeviceState:
    from edgepilot.device.memory import read_memory
    from edgepilot.device.thermal import hottest_cpu, read_thermal

    m = read_memory(root)
    zones, _ = read_thermal(root)
    hot = hottest_cpu(zones)
    return DeviceState(
        available_bytes=m.available_bytes,
        psi_some_avg10=m.psi_some_avg10,
        psi_full_avg10=m.psi_full_avg10,
        hottest_celsius=hot.celsius if hot else None,
        hottest_zone=(f"{hot.zone} ({hot.type})" if hot.type else hot.zone) if hot else None,
    )


class _Capture:
    """Copies a pipe to a sink as bytes arrive and keeps its head and tail for the diagnosis."""

    def __init__(self, fd: int, sink: BinaryIO | None) -> None:
        self.fd, self.sink = fd, sink
        self.kept = log_keeper()
        self.last_output = time.monotonic()
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.last_output = time.monotonic()
            if self.sink is not None:
                try:
                    self.sink.write(chunk)
                    self.sink.flush()
                except (OSError, ValueError):
                    self.sink = None  # our own output is gone (closed pipe): keep capturing
            self.kept.feed(chunk)

    def lines(self) -> list[str]:
        return log_lines(self.kept)


@dataclass
class Supervised:
    record: RunRecord
    lines: list[str]


def _not_found(display: str) -> UserError:
    """`command not found`, with what provides it when it is one of llama.cpp's programs."""
    from edgepilot.engine.native_tools import install_hint

    hint = install_hint(os.path.basename(display))
    return UserError(f"command not found: {display}" + (f" (llama.cpp's): {hint}" if hint else ""))


def _check_program(program: str) -> None:
    """A program named without a path must be on PATH: said now, as the direct spawn would, also when a
    memory limit runs it through a shell (which would only exit 127)."""
    if "/" not in program and which(program) is None:
        raise _not_found(program)


def _spawn(argv: list[str], display: str) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise _not_found(display) from None
    except PermissionError:
        raise UserError(f"cannot execute {display}: permission denied") from None
    except OSError as exc:
        raise UserError(f"cannot run {display}: {exc.strerror or exc}") from None


class _Watch:
    """Progress lines while the child is silent: elapsed time, RSS against the limit, page-in rate."""

    def __init__(self, pid: int, limit: int | None, quiet: list[_Capture], show: ProgressSink | None) -> None:
        self.pid, self.limit, self.quiet, self.show = pid, limit, quiet, show
        self.t0 = self.shown = time.monotonic()
        self.faults = (self.t0, major_faults(pid))

    def tick(self, rss: int | None) -> None:
        now = time.monotonic()
        last = max([self.shown, *(c.last_output for c in self.quiet)])
        if self.show is None or now - last < QUIET_SECONDS:
            return
        t_before, before = self.faults
        faults = major_faults(self.pid)
        rate = (faults - before) / (now - t_before) if faults is not None and before is not None else None
        self.faults, self.shown = (now, faults), now
        self.show(Progress(now - self.t0, rss, self.limit, rate))


def _reap(proc: subprocess.Popen[bytes], watch: _Watch | None = None) -> tuple[int, int | None]:
    """(wait status, peak RSS bytes). Ctrl-C is passed on to the child and we keep waiting for it.

    The peak is the child's VmHWM, sampled until it exits: wait4's ru_maxrss would also count the pages the
    child inherited from this process at fork, before it exec'd (a few tens of MiB of Python).
    """
    interrupted = False
    peak: int | None = None
    while True:
        try:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                if peak is None:  # gone before the first sample: ru_maxrss is an upper bound
                    peak = usage.ru_maxrss * 1024 or None
                return status, peak
            rss, hwm = rss_bytes(proc.pid)
            if hwm is not None:
                peak = max(peak or 0, hwm)
            if watch is not None:
                watch.tick(rss)
            time.sleep(SAMPLE_SECONDS)
        except ChildProcessError:
            return 0, peak
        except KeyboardInterrupt:
            if not interrupted:
                interrupted = True
                with contextlib.suppress(OSError):
                    proc.send_signal(signal.SIGINT)


class _PassOnTerm:
    """SIGTERM to the doctor is passed on to the child (a second one kills it) and the doctor goes on
    waiting, so its memory group is removed once the child is gone: Python's default SIGTERM ends the process
    without running any `finally`, which left `edgepilot-doctor-PID-N` behind. A SIGTERM that comes before
    the child exists (while the page cache is dropped) is passed on as soon as it does."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.count = 0

    def _send(self) -> None:
        if self.child is not None and self.count:
            with contextlib.suppress(OSError):
                self.child.send_signal(signal.SIGTERM if self.count == 1 else signal.SIGKILL)

    def on_term(self, _signum: int, _frame: object) -> None:
        self.count += 1
        self._send()

    def started(self, child: subprocess.Popen[bytes]) -> None:
        self.child = child
        self._send()

    @contextlib.contextmanager
    def installed(self) -> Iterator[_PassOnTerm]:
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = signal.signal(signal.SIGTERM, self.on_term)
        try:
            yield self
        finally:
            signal.signal(signal.SIGTERM, previous)


def supervise(
    argv: list[str],
    memory_limit: int | None = None,
    stdout: BinaryIO | None = None,
    stderr: BinaryIO | None = None,
    progress: ProgressSink | None = None,
) -> Supervised:
    """Run argv to the end. stdout/stderr: where to stream the child's output (None: keep it quiet).
    progress: called with a Progress every QUIET_SECONDS the child stays silent."""
    if not argv:
        raise UserError("give a command after `--`, e.g. `edgepilot doctor -- llama-cli -m model.gguf`")
    with _PassOnTerm().installed() as term:
        return _supervise(argv, memory_limit, stdout, stderr, progress, term)


def _supervise(
    argv: list[str],
    memory_limit: int | None,
    stdout: BinaryIO | None,
    stderr: BinaryIO | None,
    progress: ProgressSink | None,
    term: _PassOnTerm,
) -> Supervised:
    _check_program(argv[0])
    notes: list[str] = []
    limit = MemoryLimit(memory_limit) if memory_limit else None
    if limit is not None:
        limit.__enter__()
    try:
        if limit is not None and not drop_page_cache():
            notes.append(
                "could not drop the page cache: model pages already cached are not charged to the limit"
            )
        before = device_state()
        t0 = time.perf_counter()
        proc = _spawn(limit.wrap(argv) if limit else argv, argv[0])
        term.started(proc)
        out = _Capture(proc.stdout.fileno() if proc.stdout else -1, stdout)
        err = _Capture(proc.stderr.fileno() if proc.stderr else -1, stderr)
        status, peak = _reap(proc, _Watch(proc.pid, memory_limit, [out, err], progress))
        wall = time.perf_counter() - t0
        returncode = os.waitstatus_to_exitcode(status)
        proc.returncode = returncode  # reaped by wait4: tell Popen so it does not wait again
        for cap, pipe in ((out, proc.stdout), (err, proc.stderr)):
            cap.thread.join(timeout=5)  # a grandchild may still hold the pipe open
            if pipe is not None and not cap.thread.is_alive():
                pipe.close()
        after = device_state()
        cgroup = limit.counters() if limit is not None else {}
    finally:
        if limit is not None:
            limit.__exit__()
    sig = -returncode if returncode < 0 else None
    lines = out.lines() + err.lines()
    record = RunRecord(
        command=list(argv),
        returncode=returncode,
        exit_code=128 + sig if sig else returncode,
        signal=sig,
        signal_name=signal_name(sig),
        wall_seconds=round(wall, 3),
        peak_rss_bytes=peak,
        before=before,
        after=after,
        memory_limit_bytes=memory_limit,
        cgroup=cgroup,
        output_lines=len(lines),
        notes=notes,
    )
    return Supervised(record=record, lines=lines)
