"""The one place that decides settings the user did not give.

Today: conservative defaults for a small device. The memory planner (`fit`) and tuned profiles (`tune`)
plug in here, so `run`, `bench` and `serve` all pick up the same decisions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

import psutil

from edgepilot.engine.settings import EngineSettings

DEFAULT_CTX = 2048


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


def decide_settings(requested: RequestedSettings, n_ctx_train: int | None = None) -> EngineSettings:
    chosen = {f.name: getattr(requested, f.name) for f in fields(requested)}
    if chosen["n_ctx"] is None:
        chosen["n_ctx"] = min(DEFAULT_CTX, n_ctx_train) if n_ctx_train else DEFAULT_CTX
    if chosen["n_threads"] is None:
        chosen["n_threads"] = default_threads()
    if chosen["type_v"] is not None and chosen["type_k"] is None:
        chosen["type_k"] = chosen["type_v"]
    if chosen["type_k"] is not None and chosen["type_v"] is None:
        chosen["type_v"] = chosen["type_k"]
    if chosen["flash_attn"] is None and chosen["type_v"] not in (None, "f16", "f32", "bf16"):
        chosen["flash_attn"] = True  # a quantized V cache needs flash attention
    given = {k: v for k, v in chosen.items() if v is not None}
    return EngineSettings(**given).validate()
