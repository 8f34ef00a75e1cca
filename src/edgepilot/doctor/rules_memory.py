"""Memory causes: killed by lmkd / the OOM killer, a failed allocation, a context too large for the device."""

from __future__ import annotations

import re

from edgepilot.device import fs
from edgepilot.doctor.evidence import UNKNOWN_DEVICE, Evidence
from edgepilot.doctor.kill_records import killer_evidence, pressure_only
from edgepilot.doctor.memory_fix import memory_fix
from edgepilot.doctor.memory_signs import MemorySigns, memory_signs
from edgepilot.doctor.plan_check import plan_evidence
from edgepilot.doctor.rulekit import (
    ALLOC_FAIL,
    KILLED_LINE,
    KILLER_LINE,
    MAPPING_FAIL,
    command_with_ctx,
    mib,
    model_word,
    suggested_ctx,
    thirty_two_bit_evidence,
    upto,
)
from edgepilot.doctor.types import LIKELY, Cause, PlanCheck, cause

REFUSAL = re.compile(upto("exceeds the budget of ", "the system would kill this run"))
GPU_ALLOC = re.compile(r"cudaMalloc|ErrorOutOfDeviceMemory|Vulkan\d* buffer|" + upto("opencl", "alloc"), re.I)
NOTHING_FITS_TITLE = "The model does not fit this memory at any context"
OUTSIDE_KILL_TITLE = "Killed by a SIGKILL from outside, with no sign of memory pressure"
PRESSURE_TITLE = "Memory ran short on the device: other apps were killed (this run's end is not in the log)"
FIND_KILLER = (
    "find the killer: `logcat -d | grep lowmemorykiller` and `logcat -d -b events | grep am_kill` on "
    "Android, "
    "`dmesg | grep -i 'killed process'` on Linux"
)


def _memory_facts(ev: Evidence) -> list[str]:
    out: list[str] = []
    run = ev.run
    if run is not None:
        if run.memory_limit_bytes:
            out.append(
                f"peak RSS {mib(run.peak_rss_bytes)} under a {mib(run.memory_limit_bytes)} memory limit"
                + (f" (cgroup oom_kill={run.cgroup.get('oom_kill')})" if "oom_kill" in run.cgroup else "")
            )
        elif run.peak_rss_bytes:
            out.append(
                f"peak RSS {mib(run.peak_rss_bytes)}; "
                f"available before the run {mib(run.before.available_bytes)}"
            )
        psi = (run.before.psi_some_avg10, run.after.psi_some_avg10)
        if None not in psi and max(psi) > 0:  # type: ignore[type-var]
            out.append(f"memory pressure (PSI some avg10) {psi[0]} before, {psi[1]} after")
    elif ev.probe is not None and ev.probe.memory.available_bytes is not None:
        m = ev.probe.memory
        where = "this machine now" if ev.root is not None and fs.is_live(ev.root) else "the device's snapshot"
        out.append(f"{where}: {mib(m.available_bytes)} available of {mib(m.total_bytes)}")
    elif ev.elsewhere:
        out.append(f"device memory: not read; {UNKNOWN_DEVICE}")
    return out


def _plan_lines(plan: PlanCheck) -> list[str]:
    """The plan's verdict, then the budget it was checked against as a sum that adds up."""
    return [plan_evidence(plan), *([plan.budget_account] if plan.budget_account else [])]


def _checked_fix(ev: Evidence) -> tuple[str, list[list[str]], str | None] | None:
    """The planner's fix (doctor/memory_fix.py): it fits the failed command's budget and differs from it;
    with the title to give the cause when no context fits (then the model is what is too large)."""
    fix = memory_fix(ev) if ev.plan is not None else None
    if fix is None:
        return None
    return fix.text, fix.commands, NOTHING_FITS_TITLE if fix.nothing_fits else None


def _already(ev: Evidence) -> tuple[int | None, bool]:
    """(the context that failed, whether its KV cache was quantized already): a fix without a plan must not
    propose them again."""
    r = ev.requested
    n_ctx = r.n_ctx or ev.facts.n_ctx
    return n_ctx, (r.type_k or "f16") not in {"f16", "f32", "bf16"}


def _fallback_ctx(ev: Evidence) -> str | None:
    """`lower the context to CMD (source)` when the log's numbers give one smaller than the context that
    failed (no plan: the model is not readable here), else None."""
    n_ctx, _ = _already(ev)
    ctx, source = suggested_ctx(ev)
    if ctx is None or (n_ctx is not None and ctx >= n_ctx):
        return None
    return f"lower the context to {command_with_ctx(ev, ctx)} ({source})"


def _fallback_kv(ev: Evidence) -> str | None:
    return None if _already(ev)[1] else "quantize the KV cache (-ctk q8_0 -ctv q8_0 -fa on)"


def _plan_fits_fix(plan: PlanCheck) -> str:
    return (
        f"the plan fits in {mib(plan.budget_bytes)} ({plan.budget_source}), so something else took the "
        f"memory: {FIND_KILLER}; free memory (close other apps) before running it again"
    )


def killed_by_system(ev: Evidence) -> list[Cause]:
    killer = killer_evidence(ev)  # each line says whose process it is about
    killed = ev.grep(KILLED_LINE, limit=2)
    oom_kill = bool(ev.run and ev.run.cgroup.get("oom_kill"))
    if not (killer or killed or ev.killed or oom_kill):
        return []
    signs = memory_signs(ev)
    if signs.ruled_out:
        return [_killed_from_outside(ev, signs)]
    # a killer's line the Killed pattern also matched is shown once, saying whose process it names
    evidence = [*(k for k in killed if not KILLER_LINE.search(k)), *killer, *signs.seen]
    if ev.status_line() and ev.killed:
        evidence.insert(0, ev.status_line() or "")
    score = (95 if (killed or ev.killed or oom_kill) else 88) if (killer or oom_kill) else 65
    title = None
    pressure = None if (killed or ev.killed or oom_kill) else pressure_only(ev)
    if pressure is not None:  # only other apps killed: the device was short, this run's end is not shown
        evidence.insert(0, pressure)
        score, title = 60, PRESSURE_TITLE
    run = ev.run
    if (
        run
        and run.memory_limit_bytes
        and run.peak_rss_bytes
        and run.peak_rss_bytes >= 0.85 * run.memory_limit_bytes
    ):
        score = max(score, 90)
    evidence += _memory_facts(ev)
    plan = ev.plan
    if plan is not None:
        evidence += _plan_lines(plan)
        if not plan.fits:
            score = max(score + 5, 85)  # the planner predicts this kill: the settings explain it
    checked = _checked_fix(ev)
    commands: list[list[str]] = []
    if checked is not None:
        fix, commands, _ = checked
        if plan is not None and plan.fits:
            fix += f"; its plan fitted, so look for what else took the memory: {FIND_KILLER}"
    elif plan is not None and plan.fits:
        fix = _plan_fits_fix(plan)
    else:
        steps = [_fallback_ctx(ev) or "lower the context", *[x for x in (_fallback_kv(ev),) if x]]
        fix = (
            f"{', '.join(steps)} or use a smaller quant; {FIND_KILLER}; `edgepilot fit {model_word(ev)}` "
            "computes settings that fit"
        )
    return [cause("killed-by-system", score, evidence, fix, fix_commands=commands, title=title)]


def _killed_from_outside(ev: Evidence, signs: MemorySigns) -> Cause:
    """A SIGKILL with no sign of memory pressure: not a memory kill, so `unknown`, with what is known.

    Ranked below every matched cause and above the weak hints; the serve watchdog keeps its context for it.
    """
    evidence = [ev.status_line() or "killed by SIGKILL", *ev.grep(KILLED_LINE, limit=1), *signs.absent]
    fix = (
        "find who sent SIGKILL: a `kill -9` (by hand or from a script), a supervisor's or job runner's "
        "time limit (`timeout -s KILL`, systemd, CI), Android's phantom-process killer (`logcat -d | grep -i "
        "phantom`), or a debugger; memory was not short, so a smaller context or model will not help"
    )
    return cause("unknown", LIKELY - 1, evidence, fix, title=OUTSIDE_KILL_TITLE)


def out_of_memory_alloc(ev: Evidence) -> list[Cause]:
    lines = [ln for ln in ev.grep(ALLOC_FAIL, limit=6) if "Killed process" not in ln][:4]
    if not lines:
        return []
    evidence = lines + _memory_facts(ev)
    score = 82
    if ev.facts.kv_alloc_failed or ev.facts.compute_alloc_failed:
        score = 72  # the buffer that failed is sized by the context: context-too-large says more
    if thirty_two_bit_evidence(ev) and ev.has(MAPPING_FAIL):
        score = 70  # a 32-bit process runs out of address space first: userland-32bit says more
    plan = ev.plan
    if plan is not None:
        evidence += _plan_lines(plan)
    checked = _checked_fix(ev)
    commands: list[list[str]] = []
    if checked is not None:
        fix, commands, _ = checked
    elif plan is not None and plan.fits:
        fix = _plan_fits_fix(plan)
    else:
        gpu = ev.has(GPU_ALLOC)
        steps = ["offload fewer layers (-ngl lower)"] if gpu else []
        steps.append(f"{_fallback_ctx(ev) or 'lower the context'} and the batch (-ub 128)")
        steps += [x for x in (_fallback_kv(ev),) if x]
        fix = (
            f"free memory (close other apps), then {', '.join(steps)} or pick a smaller quant; "
            f"`edgepilot fit {model_word(ev)}` computes settings that fit"
        )
    return [cause("out-of-memory-alloc", score, evidence, fix, fix_commands=commands)]


def context_too_large(ev: Evidence) -> list[Cause]:
    f = ev.facts
    n_ctx = ev.requested.n_ctx or f.n_ctx
    evidence: list[str] = []
    score = 0
    if f.kv_alloc_failed:
        evidence += ev.grep(
            r"n_ctx\s+=|failed to allocate buffer for kv cache|kv_cache_init\(\) failed", limit=3
        )
        score = 85
    elif f.compute_alloc_failed and n_ctx and n_ctx >= 16384:
        evidence += ev.grep(r"n_ctx\s+=|failed to allocate compute", limit=2)
        score = 78
    if n_ctx and f.n_ctx_train and n_ctx > f.n_ctx_train:
        evidence.append(f"n_ctx {n_ctx} is larger than the model's training context {f.n_ctx_train}")
        score = max(score, 50) + (5 if score else 0)
    refusal = ev.grep(REFUSAL, limit=1)  # `edgepilot run` refused: its plan predicted a kill
    if refusal:
        evidence += refusal
        score = max(score, 60)
    failed = ev.killed or bool(ev.grep(ALLOC_FAIL, limit=1)) or bool(ev.run and ev.run.cgroup.get("oom_kill"))
    plan = ev.plan if (score or failed) else None
    if plan is not None and not plan.fits and plan.max_ctx < plan.n_ctx:
        evidence += _plan_lines(plan)
        score = max(score, 78 if failed else 45)
    if not score:
        return []
    checked = _checked_fix(ev) if plan is not None else None
    if checked is not None:
        fix, commands, title = checked
        return [cause("context-too-large", min(score, 95), evidence, fix, title, fix_commands=commands)]
    if refusal and plan is not None and plan.fits:
        fix = (
            f"`edgepilot run` refused at its own budget while the doctor's plan fits "
            f"{mib(plan.budget_bytes)}: `edgepilot fit {model_word(ev)}` with the same flags shows the "
            "settings that fit"
        )
        return [cause("context-too-large", min(score, 95), evidence, fix)]
    steps = [x for x in (_fallback_ctx(ev), _fallback_kv(ev)) if x]
    steps.append(f"`edgepilot fit {model_word(ev)}` computes settings that fit (or use a smaller quant)")
    fix = "; ".join(steps)
    return [cause("context-too-large", min(score, 95), evidence, fix)]


RULES = (killed_by_system, out_of_memory_alloc, context_too_large)
