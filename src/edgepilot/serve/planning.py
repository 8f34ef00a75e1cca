"""Settings for the worker: the memory planner and the tuned profile, as for `run`; and smaller ones after a
memory kill.

The planner predicts the peak of an `edgepilot run` process. A worker also carries the HTTP stack (FastAPI,
uvicorn, pydantic): SERVER_RUNTIME_BYTES, measured, is taken off the budget before planning.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from edgepilot.bench.profiles import Profile, load_profile, tuned_cpus
from edgepilot.errors import UserError
from edgepilot.plan.budget import compute_budget
from edgepilot.plan.fit import CTX_STEP, read_device
from edgepilot.plan.requested import RequestedSettings
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.types import Budget, FitResult
from edgepilot.run.defaults import decide_settings

MIB = 1 << 20
# RSS of `import fastapi, uvicorn` + the worker module on top of what `edgepilot run` has loaded
# (measured: 69 vs 46 MiB on x86-64, Python 3.11).
SERVER_RUNTIME_BYTES = 24 * MIB
MIN_CTX = 2 * CTX_STEP
SHRINK = 0.75  # after a memory kill the context shrinks to at most this share, whatever the planner says
MEMORY_CAUSES = frozenset({"killed-by-system", "out-of-memory-alloc", "context-too-large"})


@dataclass
class ServePlan:
    model: Path
    fit: FitResult
    settings: EngineSettings
    predicted_peak_bytes: int  # the worker's: the planner's peak plus the HTTP stack
    cpus: list[int] | None  # the tuned profile's CPUs (the worker pins itself before loading)
    prompt_cpus: list[int] | None = None  # the profile's CPUs for prompt processing, when they differ


def device_budget(root: str | Path, override: int | None) -> Budget:
    device = read_device(root)
    return compute_budget(device.memory, device.android, override)


def _server_budget(budget: int) -> int:
    if budget <= SERVER_RUNTIME_BYTES:
        raise UserError(f"a budget of {budget / MIB:.0f} MiB leaves nothing for the model besides the server")
    return budget - SERVER_RUNTIME_BYTES


def _fit(
    model_path: Path, requested: RequestedSettings, budget: Budget, root: str | Path, profile: Profile | None
) -> FitResult:
    """The planner's fit under the budget minus the server's own runtime, reported against the real budget."""
    fit = decide_settings(
        model_path,
        requested,
        budget_bytes=_server_budget(budget.budget_bytes),
        root=str(root),
        profile=profile,
    )
    dropped = {*fit.budget.reasons, *budget.reasons}  # the reduced budget's notes, and no duplicates
    fit.notes = [*budget.reasons, *(n for n in fit.notes if n not in dropped)]
    fit.budget, fit.budget_bytes = budget, budget.budget_bytes
    return fit


def plan_serve(
    model_path: Path, requested: RequestedSettings, budget_bytes: int | None = None, root: str | Path = "/"
) -> ServePlan:
    profile = load_profile(model_path)
    fit = _fit(model_path, requested, device_budget(root, budget_bytes), root, profile)
    cpus, prompt_cpus = tuned_cpus(requested, profile) or (None, None)
    return ServePlan(
        model=model_path,
        fit=fit,
        settings=fit.settings,
        predicted_peak_bytes=fit.memory.peak_rss_bytes + SERVER_RUNTIME_BYTES,
        cpus=cpus,
        prompt_cpus=prompt_cpus,
    )


def keep_all_but_ctx(s: EngineSettings) -> RequestedSettings:
    return RequestedSettings(
        n_ctx=None,
        n_batch=s.n_batch,
        n_ubatch=s.n_ubatch,
        type_k=s.type_k,
        type_v=s.type_v,
        flash_attn=s.flash_attn,
        use_mmap=s.use_mmap,
        n_threads=s.n_threads,
    )


def shrink_ctx(current: int, planner_max: int) -> int:
    """Strictly smaller than the context that was killed (unless already at the floor)."""
    shrunk = int(current * SHRINK) // CTX_STEP * CTX_STEP
    target = min(shrunk, planner_max) if planner_max > 0 else shrunk
    return max(min(MIN_CTX, current), target)


def after_memory_kill(
    model_path: Path, current: EngineSettings, peak_rss: int | None, root: str | Path = "/"
) -> tuple[EngineSettings, str]:
    """The next settings: the largest context the planner fits under the memory that was really there
    (the worker's peak when it was killed, or the budget now, whichever is smaller)."""
    budget = device_budget(root, None).budget_bytes
    source = "the budget now"
    if peak_rss is not None and peak_rss < budget:
        budget, source = peak_rss, "the worker's peak when it was killed"
    try:
        fit = decide_settings(model_path, keep_all_but_ctx(current), budget_bytes=_server_budget(budget))
        planner_max = fit.max_ctx
    except UserError:
        planner_max = 0
    n_ctx = shrink_ctx(current.n_ctx, planner_max)
    why = (
        f"context {current.n_ctx} -> {n_ctx} (planner: largest context under {budget / MIB:.0f} MiB, "
        f"{source}: {planner_max or 'none'})"
    )
    return replace(current, n_ctx=n_ctx), why
