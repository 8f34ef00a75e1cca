"""Memory read bandwidth: how fast this device streams bytes from RAM, the limit of token generation.

A generated token reads (about) every weight once, so tokens/s x bytes per token <= read bandwidth. Measured
by reading a buffer several times the last-level cache with numpy's bitwise-or reduction over 64-bit integers:
no float compares or NaN checks to hold it back (a float32 max read 15 % less on an Intel Xeon here), so the
memory is what gets timed. numpy releases the GIL while it reduces, so threads read their slices in parallel.
The read is timed at 1, half and all the CPUs this process may use (two threads can read faster than four:
llama.cpp#26484) and the best pass counts. Bounded: the buffer is at most an eighth of the available memory,
each thread count gets a few passes within a time budget, the whole takes a few hundred ms.

Measured in a child process (measure_in_child): its buffer (up to 512 MiB) and numpy never become part of the
peak of the process that asked (a run's `peak_rss_bytes`, and a llama.cpp child's, which inherits its
parent's resident pages in its maximum RSS when it is forked).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from edgepilot.device import fs
from edgepilot.errors import UserError

LLC_TIMES = 4  # buffer = 4x the last-level cache...
MIN_BUFFER = 64 << 20  # ...at least this (phones do not list their system-level cache in sysfs)
MAX_BUFFER = 512 << 20
CHILD_DEADLINE_S = 120.0
CHILD_OUTPUT = 64 << 10
SMALLEST = 16 << 20  # below this the cache would be measured, not the memory
MEMORY_SHARE = 8  # at most 1/8 of the available memory
ASSUMED_LLC = 8 << 20  # when sysfs lists no cache
PASSES = 8
MIN_PASSES = 2
BUDGET_S = 0.12  # per thread count, once MIN_PASSES are done
METHOD = "read"  # what the figure counts: bytes read per second (a copy would count reads and writes)


@dataclass
class Bandwidth:
    bytes_per_s: float
    threads: int  # the thread count of the best pass
    buffer_bytes: int
    seconds: float  # time the measurement took
    llc_bytes: int | None = None  # the last-level cache sysfs lists (None: not listed)
    passes: int = 0
    by_threads: dict[int, float] = field(default_factory=dict)  # best bytes/s per thread count
    method: str = METHOD
    measured_at: str = ""  # local time, ISO 8601
    cached: bool = False  # read from the data dir, not measured by this command
    latest_bytes_per_s: float | None = None  # measured again just now, lower than this kept best

    @property
    def gb_per_s(self) -> float:
        return self.bytes_per_s / 1e9

    def how(self) -> str:
        """How it was measured, in words."""
        counts = ", ".join(str(t) for t in sorted(self.by_threads)) or str(self.threads)
        size, llc = f"{self.buffer_bytes >> 20} MiB", self.llc_bytes
        if llc:
            size += f", {self.buffer_bytes // llc}x the {llc >> 20} MiB last-level cache"
        when = f", {self.measured_at[:10]}" if self.measured_at else ""
        return (
            f"{self.threads} thread{'s' if self.threads != 1 else ''} reading {size} (best of {counts} "
            f"threads, {self.passes} passes, {self.seconds:.1f} s{when})"
        )


def last_level_cache(root: Path = fs.LIVE_ROOT) -> int | None:
    """The largest data/unified cache at the highest level sysfs lists for cpu0..cpuN, in bytes."""
    cpus, _ = fs.list_dir(root, "sys/devices/system/cpu")
    best: tuple[int, int] | None = None
    for cpu in sorted(c for c in cpus if c.startswith("cpu") and c[3:].isdecimal()):
        base = f"sys/devices/system/cpu/{cpu}/cache"
        for index in fs.list_dir(root, base)[0]:
            kind, _ = fs.read_text(root, f"{base}/{index}/type", fs.VALUE_FILE)
            level, _ = fs.read_int(root, f"{base}/{index}/level")
            size = _size(fs.read_text(root, f"{base}/{index}/size", fs.VALUE_FILE)[0])
            if (kind or "").strip() == "Instruction" or level is None or not size:
                continue
            best = max(best or (level, size), (level, size))
    return best[1] if best else None


def _size(text: str | None) -> int | None:
    """sysfs cache sizes: `32768K`, `8M`, `1024`."""
    t = (text or "").strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    digits = t.rstrip("KMG")
    return int(digits) * scale if digits.isdecimal() else None


def buffer_size(llc: int | None, available: int | None) -> int:
    """Bytes to read: LLC_TIMES the last-level cache, within [MIN_BUFFER, MAX_BUFFER] and 1/MEMORY_SHARE of
    the available memory. UserError when that leaves less than SMALLEST."""
    size = min(max(LLC_TIMES * (llc or ASSUMED_LLC), MIN_BUFFER), MAX_BUFFER)
    if available is not None:
        size = min(size, available // MEMORY_SHARE)
    size = size >> 20 << 20
    if size < SMALLEST:
        free = f"{(available or 0) >> 20} MiB" if available is not None else "too little memory"
        raise UserError(f"not measuring memory bandwidth: {free} available; close other apps and retry")
    return size


def thread_counts(cpus: int) -> list[int]:
    return sorted({1, max(1, cpus // 2), max(1, cpus)})


def measure_read_bandwidth(cpus: int | None = None, root: Path = fs.LIVE_ROOT) -> Bandwidth:
    """Measure this machine's memory read bandwidth (root: where the cache sizes and free memory are read)."""
    import numpy as np

    from edgepilot.device.memory import read_memory
    from edgepilot.device.process import allowed_cpus

    cpus = cpus or len(allowed_cpus())
    llc = last_level_cache(root)
    size = buffer_size(llc, read_memory(root).available_bytes)
    t_start = time.perf_counter()
    data = np.full(size // 8, 1, dtype=np.uint64)  # written once: the pages exist before timing
    by_threads: dict[int, float] = {}
    passes = 0
    try:
        for threads in thread_counts(cpus):
            slices = [data[k * data.size // threads : (k + 1) * data.size // threads] for k in range(threads)]
            t_count, best = time.perf_counter(), float("inf")
            for done in range(PASSES):
                if done >= MIN_PASSES and time.perf_counter() - t_count > BUDGET_S:
                    break
                best = min(best, _timed_pass(slices))
                passes += 1
            by_threads[threads] = data.nbytes / best
    finally:
        del data
    threads = max(by_threads, key=lambda t: by_threads[t])
    return Bandwidth(
        bytes_per_s=by_threads[threads],
        threads=threads,
        buffer_bytes=size,
        seconds=round(time.perf_counter() - t_start, 3),
        llc_bytes=llc,
        passes=passes,
        by_threads={t: round(v) for t, v in by_threads.items()},
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )


def _timed_pass(slices: list) -> float:
    """Seconds for every thread to read its slice once, timed from a common start."""
    import numpy as np

    barrier = threading.Barrier(len(slices) + 1)

    def read(part, barrier=barrier) -> None:
        barrier.wait()
        np.bitwise_or.reduce(part)

    pool = [threading.Thread(target=read, args=(s,), daemon=True) for s in slices]
    for t in pool:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    return time.perf_counter() - t0


def measure_in_child(deadline: float = CHILD_DEADLINE_S) -> Bandwidth:
    """measure_read_bandwidth() in a child Python process (on the CPUs this process may use): none of its
    memory shows in this process. UserError when it cannot be measured so."""
    import edgepilot

    package_root = str(Path(edgepilot.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    if not sys.executable:
        raise UserError("not measuring memory bandwidth: no Python program to measure it in a child")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "edgepilot.device.bandwidth"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=deadline,
            env=env,
        )
    except PermissionError:  # a sandbox where this Python cannot be started again: measured here, as before
        return measure_read_bandwidth()
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"not measuring memory bandwidth: its child process failed ({exc})") from None
    try:
        data = json.loads(done.stdout[:CHILD_OUTPUT])
    except ValueError:
        data = None
    if not isinstance(data, dict):
        last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [
            f"status {done.returncode}"
        ]
        raise UserError(f"not measuring memory bandwidth: its child process failed ({last[0][:200]})")
    if "error" in data:
        raise UserError(str(data["error"])[:400])
    try:
        bw = Bandwidth(**{k: data[k] for k in Bandwidth.__dataclass_fields__ if k in data})
        bw.by_threads = {int(t): float(v) for t, v in dict(bw.by_threads).items()}
    except (TypeError, ValueError) as exc:
        raise UserError(f"not measuring memory bandwidth: its child printed {exc}") from None
    return bw


if __name__ == "__main__":  # the child of measure_in_child
    try:
        print(json.dumps(asdict(measure_read_bandwidth())))
    except UserError as exc:
        print(json.dumps({"error": str(exc)}))
