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
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from edgepilot.device import fs
from edgepilot.device.process import rss_bytes
from edgepilot.doctor.cgroup import MemoryLimit, drop_page_cache
from edgepilot.doctor.evidence import signal_name
from edgepilot.doctor.types import DeviceState, RunRecord
from edgepilot.errors import UserError

SAMPLE_SECONDS = 0.02
KEEP_BYTES = 16 << 20  # per stream: the first and the last 16 MiB of output are kept for the diagnosis


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
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
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
            if self.sink is not None:
                try:
                    self.sink.write(chunk)
                    self.sink.flush()
                except (OSError, ValueError):
                    self.sink = None  # our own output is gone (closed pipe): keep capturing
            room = KEEP_BYTES - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail += chunk
                if len(self.tail) > KEEP_BYTES:
                    cut = len(self.tail) - KEEP_BYTES
                    self.dropped += cut
                    del self.tail[:cut]

    def lines(self) -> list[str]:
        data = bytes(self.head)
        if self.dropped:
            data += f"\n[... {self.dropped} bytes of output not kept ...]\n".encode()
        data += bytes(self.tail)
        return data.decode("utf-8", errors="replace").splitlines()


@dataclass
class Supervised:
    record: RunRecord
    lines: list[str]


def _spawn(argv: list[str], display: str) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise UserError(f"command not found: {display}") from None
    except PermissionError:
        raise UserError(f"cannot execute {display}: permission denied") from None
    except OSError as exc:
        raise UserError(f"cannot run {display}: {exc.strerror or exc}") from None


def _reap(proc: subprocess.Popen[bytes]) -> tuple[int, int | None]:
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
            hwm = rss_bytes(proc.pid)[1]
            if hwm is not None:
                peak = max(peak or 0, hwm)
            time.sleep(SAMPLE_SECONDS)
        except ChildProcessError:
            return 0, peak
        except KeyboardInterrupt:
            if not interrupted:
                interrupted = True
                with contextlib.suppress(OSError):
                    proc.send_signal(signal.SIGINT)


def supervise(
    argv: list[str],
    memory_limit: int | None = None,
    stdout: BinaryIO | None = None,
    stderr: BinaryIO | None = None,
) -> Supervised:
    """Run argv to the end. stdout/stderr: where to stream the child's output (None: keep it quiet)."""
    if not argv:
        raise UserError("give a command after `--`, e.g. `edgepilot doctor -- llama-cli -m model.gguf`")
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
        out = _Capture(proc.stdout.fileno() if proc.stdout else -1, stdout)
        err = _Capture(proc.stderr.fileno() if proc.stderr else -1, stderr)
        status, peak = _reap(proc)
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
