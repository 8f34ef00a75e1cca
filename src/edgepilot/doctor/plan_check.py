"""Ask the memory planner (edgepilot.plan.fit) whether the settings that were run fit, and what would.

Consulted only when a memory rule needs numbers and the model is readable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgepilot.doctor.types import PlanCheck

if TYPE_CHECKING:
    from edgepilot.doctor.evidence import Evidence


def check_plan(ev: Evidence) -> PlanCheck | None:
    if ev.model_local is None:
        ev.checked.append("memory plan: skipped (no readable model)")
        return None
    if ev.validation is not None and not ev.validation.ok:
        ev.checked.append("memory plan: skipped (the model file has problems)")
        return None
    from edgepilot.plan.fit import fit_model  # reads the model and the device: only when a rule needs it

    requested = ev.requested
    root = ev.root if ev.root is not None else "/"
    try:
        fit = fit_model(ev.model_local, requested=requested, budget_bytes=ev.budget_bytes, root=root)
    except Exception as exc:  # the planner's own errors must not stop the diagnosis
        ev.checked.append(f"memory plan: failed ({type(exc).__name__}: {exc})")
        return None
    ev.checked.append(f"memory plan: ctx {fit.settings.n_ctx} {'fits' if fit.fits else 'does not fit'}")
    return PlanCheck(
        fits=fit.fits,
        budget_bytes=fit.budget_bytes,
        budget_source="the --memory-limit"
        if ev.run is not None and ev.run.memory_limit_bytes
        else fit.budget.source,
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
