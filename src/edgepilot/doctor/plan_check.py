"""Ask the memory planner (edgepilot.plan.fit) whether the settings that were run fit, and what would.

Consulted only when a memory rule needs numbers and the model is readable. The budget is the one the failed
command had: `edgepilot run`'s own when it refused (its refusal says it), else the --memory-limit it ran
under or the budget the caller gave, else this device's now.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.doctor.types import PlanCheck

if TYPE_CHECKING:
    from edgepilot.plan.requested import RequestedSettings

MIB = 1 << 20
# `edgepilot run`'s refusal (plan/types.py DoesNotFit): "... exceeds the budget of 131.9 MiB: ..."
REFUSED_BUDGET = re.compile(r"exceeds the budget of (\d{1,9}(?:\.\d)?) MiB")
# the budget's account as fit and run print it (plan/budget.py), and its wrapped continuations
ACCOUNT = re.compile(r"^budget \d+\.\d MiB\b")
ACCOUNT_MORE = re.compile(r"^ {2}[−+<(=]")


def refused_budget(lines: list[str]) -> int | None:
    """The budget `edgepilot run` refused against, as it showed it (to 0.1 MiB)."""
    for line in reversed(lines):
        m = REFUSED_BUDGET.search(line)
        if m:
            return int(float(m.group(1)) * MIB)
    return None


def printed_account(lines: list[str]) -> str | None:
    """The budget's account line a run printed (its wrapped pieces joined), None when it printed none."""
    for i in range(len(lines) - 1, -1, -1):
        if ACCOUNT.match(lines[i]):
            parts = [lines[i].strip()]
            for more in lines[i + 1 : i + 6]:
                if not ACCOUNT_MORE.match(more):
                    break
                parts.append(more.strip())
            return " ".join(parts)
    return None


def check_plan(
    model: str | None,
    model_ok: bool,
    requested: RequestedSettings,
    budget_bytes: int | None,
    root: Path | str | None,
    under_limit: bool,
    checked: list[str],
    lines: list[str] | None = None,
    program: bool = False,
) -> PlanCheck | None:
    """The plan for the settings that ran; what was done goes to `checked` (the evidence's list).
    model_ok: False when validation found problems. under_limit: the run had a --memory-limit.
    lines: the command's output (a refusal names the budget). program: llama.cpp's own program ran it
    (no interpreter: plan.memory_model.program_arithmetic)."""
    if model is None:
        checked.append("memory plan: skipped (no readable model)")
        return None
    if not model_ok:
        checked.append("memory plan: skipped (the model file has problems)")
        return None
    from edgepilot.defaults import DEFAULT_CTX
    from edgepilot.plan.fit import fit_model  # reads the model and the device: only when a rule needs it
    from edgepilot.plan.memory_model import program_arithmetic

    refused = refused_budget(lines or [])
    budget = refused if refused is not None else budget_bytes
    try:
        fit = fit_model(
            model,
            requested=requested,
            budget_bytes=budget,
            root=root or "/",
            ctx_target=None if program else DEFAULT_CTX,  # `edgepilot run`'s context when none is given
            arithmetic=program_arithmetic if program else None,
            own_process=False,  # the doctor is not the run
        )
    except Exception as exc:  # the planner's own errors must not stop the diagnosis
        checked.append(f"memory plan: failed ({type(exc).__name__}: {exc})")
        return None
    checked.append(f"memory plan: ctx {fit.settings.n_ctx} {'fits' if fit.fits else 'does not fit'}")
    if refused is not None:
        source = "edgepilot run's own budget"
        account = printed_account(lines or []) or f"budget {budget / MIB:.1f} MiB: {source}"
    elif budget_bytes is not None:
        source = "the --memory-limit" if under_limit else "the budget given"
        account = f"budget {budget_bytes / MIB:.1f} MiB = {source}, nothing kept free"
    else:
        source, account = fit.budget.source, fit.budget.account
    return PlanCheck(
        fits=fit.fits,
        budget_bytes=fit.budget_bytes,
        budget_source=source,
        n_ctx=fit.settings.n_ctx,
        peak_rss_bytes=fit.memory.peak_rss_bytes,
        weights_bytes=fit.memory.weights_bytes,
        kv_bytes=fit.memory.kv_bytes,
        compute_reserved_bytes=fit.memory.compute_reserved_bytes,
        max_ctx=fit.max_ctx,
        llama_cpp_args=list(fit.llama_cpp_args),
        budget_account=account,
        fit=fit,
    )


def mib(n: int | float | None) -> str:
    return "?" if n is None else f"{n / 1048576:.0f} MiB"


def plan_evidence(plan: PlanCheck) -> str:
    verdict = "fits" if plan.fits else "does not fit"
    return (
        f"memory plan: ctx {plan.n_ctx} needs ~{_peak_sum(plan)}; budget {mib(plan.budget_bytes)} "
        f"({plan.budget_source or 'planner'}): {verdict}; largest context that fits: {plan.max_ctx or 'none'}"
    )


def _peak_sum(plan: PlanCheck) -> str:
    """The peak as a sum that adds up on screen (0.1 MiB): what the process holds, by part; `other` is the
    rest (output buffer, the loading moment's extra pages). Without the planner's breakdown: the main ones."""
    memory = plan.fit.memory if plan.fit is not None else None
    if memory is None:
        return (
            f"{mib(plan.peak_rss_bytes)} resident (weights {mib(plan.weights_bytes)}, "
            f"KV {mib(plan.kv_bytes)}, compute {mib(plan.compute_reserved_bytes)} reserved)"
        )
    parts = {
        "runtime": memory.runtime_bytes,
        "weights": memory.weights_bytes + memory.repack_bytes,
        "KV": memory.kv_bytes,
        "compute touched": memory.compute_touched_bytes + getattr(memory, "compute_work_bytes", 0),
    }
    shown = {name: round(n / 1048576, 1) for name, n in parts.items()}
    total = round(plan.peak_rss_bytes / 1048576, 1)
    rest = round(total - sum(shown.values()), 1)
    if rest < 0:  # rounding only: the largest part absorbs it
        largest = max(shown, key=lambda k: shown[k])
        shown[largest] = round(shown[largest] + rest, 1)
        rest = 0.0
    terms = [f"{name} {value:.1f}" for name, value in shown.items()] + ([f"other {rest:.1f}"] if rest else [])
    return f"{total:.1f} MiB at its peak = " + " + ".join(terms)
