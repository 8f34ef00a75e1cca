"""Settings for the worker: the settings decision `run` uses (tuned.decide); smaller ones after a memory kill.

A worker carries the HTTP stack besides what an `edgepilot run` process holds: SERVER_RUNTIME_BYTES, measured,
is counted in its predicted peak.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from edgepilot.engine.choice import EngineInfo, choose_engine
from edgepilot.errors import UserError
from edgepilot.plan.budget import compute_budget
from edgepilot.plan.fit import CTX_STEP, read_device
from edgepilot.plan.requested import RequestedSettings, as_requested
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.types import Budget, FitResult
from edgepilot.serve.short_lane import short_lane_bytes
from edgepilot.tuned.decide import Decision, decide

MIB = 1 << 20
# RSS of the worker module with Starlette and uvicorn on top of what `edgepilot run` has loaded
# (measured: 54.5 vs 45.8 MiB on x86-64, Python 3.11; FastAPI and pydantic took 67.2).
SERVER_RUNTIME_BYTES = 10 * MIB
MIN_CTX = 2 * CTX_STEP
SHRINK = 0.75  # after a memory kill the context shrinks to at most this share, whatever the planner says
MEMORY_CAUSES = frozenset({"killed-by-system", "out-of-memory-alloc", "context-too-large"})


@dataclass
class ServePlan:
    model: Path
    fit: FitResult
    settings: EngineSettings
    predicted_peak_bytes: int  # the worker's, HTTP stack included
    cpus: list[int] | None  # the tuned profile's CPUs (the worker pins itself before loading)
    prompt_cpus: list[int] | None = None  # the profile's CPUs for prompt processing, when they differ
    short_ctx: int = 0  # the short lane's context (serve/short_lane.py); 0: none


def device_budget(root: str | Path, override: int | None) -> Budget:
    device = read_device(root)
    return compute_budget(device.memory, device.android, override)


def plan_serve(
    model_path: Path,
    requested: RequestedSettings,
    budget_bytes: int | None = None,
    root: str | Path = "/",
    engine: EngineInfo | None = None,
    short_ctx: int = 0,
    speculation: Any = None,
) -> ServePlan:
    """The same decision as `run`'s, with the server's HTTP stack counted in the worker's peak. engine: the
    worker's llama.cpp when it is llama-server (its own HTTP stack is in its calibrated runtime).
    short_ctx: the short lane's context, planned in when the budget has room for it beside the main one."""
    tools = engine is not None and engine.kind == "tools"
    base = 0 if tools else SERVER_RUNTIME_BYTES

    def decision_for(reserve: int) -> Decision:
        return decide(
            model_path,
            requested,
            root=root,
            budget_bytes=budget_bytes,
            reserve_bytes=reserve,
            engine=engine,
            own_process=False,  # the model runs in the worker: this front stays beside it
            sustained=True,  # a server runs for hours: the settings tuned for the speed they hold, if any
            speculation=speculation,  # llama-server's draft and verify rows, at the settings chosen
        )

    decision = decision_for(base)
    if short_ctx and decision.plan.fits:
        short_ctx = min(short_ctx, decision.plan.settings.n_ctx)
        extra = short_lane_bytes(model_path, decision.plan.settings, short_ctx, root, slot=tools)
        with_lane = decision_for(base + extra)
        if with_lane.plan.fits and with_lane.plan.settings.n_ctx >= decision.plan.settings.n_ctx:
            decision = with_lane
            decision.plan.notes.append(
                f"short lane: a second context of {short_ctx} tokens ({extra / MIB:.0f} MiB) answers short "
                "requests while a long one runs (--short-lane 0: none)"
            )
        else:
            decision.plan.notes.append(
                f"no short lane: its {extra / MIB:.0f} MiB would cost the context; short requests wait for "
                "long ones"
            )
            short_ctx = 0
    else:
        short_ctx = 0
    fit = decision.plan
    return ServePlan(
        model=model_path,
        fit=fit,
        settings=fit.settings,
        predicted_peak_bytes=fit.memory.peak_rss_bytes,
        cpus=decision.cpus,
        prompt_cpus=decision.prompt_cpus,
        short_ctx=short_ctx,
    )


def worker_reserve(model_path: Path, settings: EngineSettings, short_ctx: int, root: str | Path = "/") -> int:
    """What an in-process worker holds besides a run's: the HTTP stack, and the short lane when it has one."""
    lane = short_lane_bytes(model_path, settings, short_ctx, root) if short_ctx else 0
    return SERVER_RUNTIME_BYTES + lane


def keep_all_but_ctx(s: EngineSettings) -> RequestedSettings:
    return replace(as_requested(s), n_ctx=None)


def shrink_ctx(current: int, planner_max: int) -> int:
    """Strictly smaller than the context that was killed (unless already at the floor)."""
    shrunk = int(current * SHRINK) // CTX_STEP * CTX_STEP
    target = min(shrunk, planner_max) if planner_max > 0 else shrunk
    return max(min(MIN_CTX, current), target)


def after_memory_kill(
    model_path: Path,
    current: EngineSettings,
    peak_rss: int | None,
    root: str | Path = "/",
    short_ctx: int = 0,
) -> tuple[EngineSettings, str]:
    """The next settings: the largest context the planner fits under the memory that was really there
    (the worker's peak when it was killed, or the budget now, whichever is smaller)."""
    budget = device_budget(root, None).budget_bytes
    source = "the budget now"
    if peak_rss is not None and peak_rss < budget:
        budget, source = peak_rss, "the worker's peak when it was killed"
    try:
        fit = decide(
            model_path,
            keep_all_but_ctx(current),
            budget_bytes=budget,
            reserve_bytes=worker_reserve(model_path, current, short_ctx, root),
            use_profile=False,
        ).plan
        planner_max = fit.max_ctx
    except UserError:
        planner_max = 0
    n_ctx = shrink_ctx(current.n_ctx, planner_max)
    why = (
        f"context {current.n_ctx} -> {n_ctx} (planner: largest context under {budget / MIB:.0f} MiB, "
        f"{source}: {planner_max or 'none'})"
    )
    return replace(current, n_ctx=n_ctx), why


def checked_inprocess(requested: RequestedSettings, log: Callable[[str], None]) -> RequestedSettings:
    """The request for an in-process worker after the CPU check of its library (engine/cpu_check.py): without
    repacking when it crashed with it (said once through `log`)."""
    checked = choose_engine("inprocess")
    if checked.no_repack and requested.repack is None:
        log(checked.cpu_note or "weight repacking crashed here: serving without it")
        return replace(requested, repack=False)
    return requested
