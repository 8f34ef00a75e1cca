"""Ask the memory planner (edgepilot.plan.fit) whether the settings that were run fit, and what would.

Consulted only when a memory rule needs numbers and the model is readable.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.doctor.types import PlanCheck

if TYPE_CHECKING:
    from edgepilot.plan.requested import RequestedSettings


def check_plan(
    model: str | None,
    model_ok: bool,
    requested: RequestedSettings,
    budget_bytes: int | None,
    root: Path | str | None,
    under_limit: bool,
    checked: list[str],
) -> PlanCheck | None:
    """The plan for the settings that ran; what was done goes to `checked` (the evidence's list).
    model_ok: False when validation found problems. under_limit: the run had a --memory-limit."""
    if model is None:
        checked.append("memory plan: skipped (no readable model)")
        return None
    if not model_ok:
        checked.append("memory plan: skipped (the model file has problems)")
        return None
    from edgepilot.plan.fit import fit_model  # reads the model and the device: only when a rule needs it

    try:
        fit = fit_model(model, requested=requested, budget_bytes=budget_bytes, root=root or "/")
    except Exception as exc:  # the planner's own errors must not stop the diagnosis
        checked.append(f"memory plan: failed ({type(exc).__name__}: {exc})")
        return None
    checked.append(f"memory plan: ctx {fit.settings.n_ctx} {'fits' if fit.fits else 'does not fit'}")
    return PlanCheck(
        fits=fit.fits,
        budget_bytes=fit.budget_bytes,
        budget_source="the --memory-limit" if under_limit else fit.budget.source,
        n_ctx=fit.settings.n_ctx,
        peak_rss_bytes=fit.memory.peak_rss_bytes,
        weights_bytes=fit.memory.weights_bytes,
        kv_bytes=fit.memory.kv_bytes,
        compute_reserved_bytes=fit.memory.compute_reserved_bytes,
        max_ctx=fit.max_ctx,
        llama_cpp_args=list(fit.llama_cpp_args),
    )


def mib(n: int | float | None) -> str:
    return "?" if n is None else f"{n / 1048576:.0f} MiB"


def plan_evidence(plan: PlanCheck) -> str:
    verdict = "fits" if plan.fits else "does not fit"
    return (
        f"memory plan: ctx {plan.n_ctx} needs ~{mib(plan.peak_rss_bytes)} resident (weights "
        f"{mib(plan.weights_bytes)}, KV {mib(plan.kv_bytes)}, compute {mib(plan.compute_reserved_bytes)} "
        f"reserved); budget {mib(plan.budget_bytes)} ({plan.budget_source or 'planner'}): {verdict}; "
        f"largest context that fits: {plan.max_ctx or 'none'}"
    )
