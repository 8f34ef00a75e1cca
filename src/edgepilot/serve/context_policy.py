"""Grow the worker's context back once the memory a memory kill took away is there again.

The counterpart of serve/planning.py's after_memory_kill: the context grows back toward the one planned at
start (never past it), only as far as the planner fits under the device's budget now, and only after the
shrunk worker has run quietly for a while (each memory kill doubles that wait, so a device that keeps running
short does not flap between two contexts).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from edgepilot.errors import UserError
from edgepilot.plan.fit import CTX_STEP
from edgepilot.plan.settings import EngineSettings
from edgepilot.serve.planning import MIB, device_budget, keep_all_but_ctx, worker_reserve
from edgepilot.tuned.decide import decide

GROW_AFTER_SECONDS = 300.0  # a shrunk worker runs this long without a memory death before it regrows
MAX_GROW_AFTER_SECONDS = 3600.0
GROW_CHECK_SECONDS = 30.0  # how often a quiet, shrunk worker asks the planner


def grow_ctx(current: int, planned: int, planner_max: int) -> int:
    """The context to restart with: toward `planned`, as far as the planner fits; never below `current`."""
    target = min(planned, planner_max // CTX_STEP * CTX_STEP)
    return max(current, target)


@dataclass
class GrowthPolicy:
    """When a worker whose context was shrunk may grow it back."""

    planned_ctx: int
    grow_after: float = GROW_AFTER_SECONDS

    def memory_death(self) -> None:
        self.grow_after = min(MAX_GROW_AFTER_SECONDS, self.grow_after * 2)

    def shrunk(self, settings: EngineSettings) -> bool:
        return settings.n_ctx < self.planned_ctx

    def quiet(self, uptime: float, busy: bool, gated: bool) -> bool:
        return uptime >= self.grow_after and not busy and not gated


def after_memory_returns(
    model_path: Path,
    current: EngineSettings,
    planned_ctx: int,
    root: str | Path = "/",
    short_ctx: int = 0,
) -> tuple[EngineSettings, str] | None:
    """Settings with a larger context when the budget now fits one (up to planned_ctx), else None."""
    if current.n_ctx >= planned_ctx:
        return None
    budget = device_budget(root, None).budget_bytes
    try:
        fit = decide(
            model_path,
            keep_all_but_ctx(current),
            root=root,
            budget_bytes=budget,
            reserve_bytes=worker_reserve(model_path, current, short_ctx, root),
            use_profile=False,
        ).plan
    except UserError:
        return None
    n_ctx = grow_ctx(current.n_ctx, planned_ctx, fit.max_ctx)
    if n_ctx <= current.n_ctx:
        return None
    why = (
        f"context {current.n_ctx} -> {n_ctx} (memory is back: the planner fits {fit.max_ctx} under "
        f"{budget / MIB:.0f} MiB, the budget now; planned at start: {planned_ctx})"
    )
    return replace(current, n_ctx=n_ctx), why
