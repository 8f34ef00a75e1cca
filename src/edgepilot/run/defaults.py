"""The one place that decides settings the user did not give, for `run` (and later `serve`, `bench`).

The memory planner picks what fits this device's budget; a tuned profile (`tune`) fills in speed choices.
"""

from __future__ import annotations

import os
from dataclasses import replace

from edgepilot.bench.profiles import Profile, apply_profile, finish_with_profile
from edgepilot.plan.fit import fit_model
from edgepilot.plan.requested import RequestedSettings, default_threads, usable_cpus
from edgepilot.plan.types import FitResult

__all__ = ["RequestedSettings", "decide_settings", "default_threads", "usable_cpus", "RUN_CTX"]

# A run's context when none is asked for: enough for a conversation, without reserving the whole trained
# context (its KV cache is cleared at creation, so every cell costs resident memory).
RUN_CTX = 4096


def decide_settings(
    model_path: str | os.PathLike[str],
    requested: RequestedSettings,
    ctx_needed: int = 0,
    budget_bytes: int | None = None,
    root: str = "/",
    profile: Profile | None = None,
) -> FitResult:
    ctx_target = max(RUN_CTX, ctx_needed)
    # edgepilot tune's profile fills in threads, ubatch and flash attention where the user gave none
    tuned = apply_profile(requested, profile)
    plan = fit_model(model_path, tuned, budget_bytes=budget_bytes, root=root, ctx_target=ctx_target)
    if profile is not None and not plan.fits and tuned.n_ubatch != requested.n_ubatch:  # memory comes first
        tuned = replace(tuned, n_ubatch=requested.n_ubatch)
        plan = fit_model(model_path, tuned, budget_bytes=budget_bytes, root=root, ctx_target=ctx_target)
    return finish_with_profile(plan, requested, profile)
