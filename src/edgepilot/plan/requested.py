"""What the user asked for, and the one default thread count for what they did not."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import psutil

from edgepilot.device.cpu import CpuFacts


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
    n_threads_batch: int | None = None  # prompt processing (None: the tuned profile's, else n_threads)
    repack: bool | None = None  # llama.cpp's CPU_REPACK of weights (None: on, as llama.cpp does)
    profile: bool | None = None  # False: leave the tuned profile out (--no-profile); None: use it if any

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
        no_repack: bool = False,
        no_profile: bool = False,
    ) -> RequestedSettings:
        """The command-line flags `run`, `fit` and `serve` share (one --kv sets both K and V)."""
        return cls(
            n_ctx=ctx,
            n_batch=batch,
            n_ubatch=ubatch,
            type_k=kv,
            type_v=kv,
            flash_attn=flash_attn,
            use_mmap=False if no_mmap else None,
            n_threads=threads,
            repack=False if no_repack else None,
            profile=False if no_profile else None,
        )


def _set_fields(r: RequestedSettings) -> dict[str, object]:
    return {f.name: getattr(r, f.name) for f in fields(r) if getattr(r, f.name) is not None}


def merged(base: RequestedSettings, *overrides: RequestedSettings | None) -> RequestedSettings:
    """base with every field an override sets (later overrides win)."""
    for over in overrides:
        if over is not None:
            base = replace(base, **_set_fields(over))
    return base


def as_requested(settings: object) -> RequestedSettings:
    """Every field of an EngineSettings that a request can carry: 'run exactly these' (no profile)."""
    names = [f.name for f in fields(RequestedSettings) if hasattr(settings, f.name)]
    carried = {name: getattr(settings, name) for name in names}
    return RequestedSettings(**{**carried, "profile": False})


def default_threads(cpu: CpuFacts, allowed_cpus: int | None) -> int:
    """One thread per big core: little cores stall the big ones at every barrier (references.md).

    allowed_cpus: how many CPUs this process may use when planning for this machine (None for a device tree);
    then also no more than its physical cores (SMT siblings share one core's units)."""
    big = len(cpu.big_cores) or cpu.cores or 1
    if allowed_cpus is None:
        return max(1, big)
    physical = psutil.cpu_count(logical=False) or allowed_cpus
    return max(1, min(big, physical, allowed_cpus))
