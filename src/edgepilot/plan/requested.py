"""What the user asked for, and the device-neutral defaults for what they did not."""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class RequestedSettings:
    """What the user asked for on the command line; None = let edgepilot decide."""

    n_ctx: int | None = None
    n_batch: int | None = None
    n_ubatch: int | None = None
    type_k: str | None = None
    type_v: str | None = None
    flash_attn: bool | None = None
    use_mmap: bool | None = None
    n_threads: int | None = None


def usable_cpus() -> int:
    """CPUs this process may run on (respects taskset / cgroup cpusets)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_threads() -> int:
    physical = psutil.cpu_count(logical=False) or usable_cpus()
    return max(1, min(physical, usable_cpus()))
