"""What the kernel says about a running process: its resident memory and the CPUs it may run on.

The one place that reads /proc/PID/status and the CPU affinity; the engine, serve, doctor, bench and plan ask
here. Unlike the device readers over a root, these read the live system only: a process is not part of a
device tree.
"""

from __future__ import annotations

import os
import resource
import sys

from edgepilot.untrusted import read_capped

STATUS_BYTES = 64 << 10  # /proc/PID/status is ~1.5 KiB


def status_bytes(pid: int | str = "self") -> dict[str, int]:
    """The `kB` lines of /proc/PID/status in bytes (VmRSS, VmHWM, RssAnon, ...); {} once the process is gone
    or where there is no /proc."""
    try:
        text = read_capped(f"/proc/{pid}/status", STATUS_BYTES).decode("ascii", errors="replace")
    except OSError:
        return {}
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB" and parts[0].isdecimal():
            out[key] = int(parts[0]) * 1024
    return out


def rss_bytes(pid: int | str = "self") -> tuple[int | None, int | None]:
    """(VmRSS, VmHWM) of a process in bytes: its resident memory now and at its peak."""
    status = status_bytes(pid)
    return status.get("VmRSS"), status.get("VmHWM")


def peak_rss_bytes() -> int:
    """This process's peak resident memory: VmHWM on Linux/Android; getrusage's ru_maxrss elsewhere (bytes on
    macOS, KiB on Linux)."""
    hwm = rss_bytes()[1]
    if hwm is not None:
        return hwm
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss if sys.platform == "darwin" else maxrss * 1024


def allowed_cpus(pid: int = 0) -> list[int]:
    """The CPUs a process (0: this one) may run on now: taskset and cgroup cpusets respected."""
    try:
        return sorted(os.sched_getaffinity(pid))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))
