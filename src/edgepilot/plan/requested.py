"""What the user asked for, and the device-neutral defaults for what they did not."""

from __future__ import annotations

from dataclasses import dataclass

import psutil

from edgepilot.device.process import allowed_cpus


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

    @classmethod
    def from_flags(
        cls,
        ctx: int | None = None,
        batch: int | None = None,
        ubatch: int | None = None,
        kv: str | None = None,
        flash_attn: bool | None = None,
        no_mmap: bool = False,
        threads: int | None = None,
    ) -> RequestedSettings:
        """The command-line flags `run`, `fit` and `serve` share (one --kv sets both K and V)."""
        return cls(ctx, batch, ubatch, kv, kv, flash_attn, False if no_mmap else None, threads)


def usable_cpus() -> int:
    """CPUs this process may run on (respects taskset / cgroup cpusets)."""
    return len(allowed_cpus())


def default_threads() -> int:
    physical = psutil.cpu_count(logical=False) or usable_cpus()
    return max(1, min(physical, usable_cpus()))
