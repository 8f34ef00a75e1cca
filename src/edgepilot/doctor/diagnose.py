"""Run every rule over the evidence, merge what they found, rank it, and say `unknown` when nothing fits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from edgepilot.device import fs
from edgepilot.doctor import (
    rules_android,
    rules_build,
    rules_cpu,
    rules_engine,
    rules_memory,
    rules_model,
    rules_rpc,
    rules_speculation,
    rules_vulkan,
)
from edgepilot.doctor.evidence import Evidence, gather
from edgepilot.doctor.types import LIKELY, Cause, Diagnosis, RunRecord, cause
from edgepilot.plan.requested import RequestedSettings

Rule = Callable[[Evidence], list[Cause]]
RULES: tuple[Rule, ...] = (
    *rules_memory.RULES,
    *rules_model.RULES,
    *rules_android.RULES,
    *rules_cpu.RULES,
    *rules_vulkan.RULES,
    *rules_build.RULES,
    *rules_rpc.RULES,
    *rules_engine.RULES,
    *rules_speculation.RULES,
)
MAX_EVIDENCE = 8


def _rule_name(rule: Rule) -> str:
    return getattr(rule, "__name__", "rule").replace("_", "-")


def rank(found: list[Cause]) -> list[Cause]:
    merged: dict[str, Cause] = {}
    for c in found:
        have = merged.get(c.id)
        if have is None:
            merged[c.id] = c
            continue
        if c.score > have.score:
            have.score, have.fix, have.fix_commands, have.title = c.score, c.fix, c.fix_commands, c.title
        have.evidence += [e for e in c.evidence if e not in have.evidence]
    for c in merged.values():
        c.evidence = [e for e in dict.fromkeys(c.evidence) if e][:MAX_EVIDENCE]
    # Ties keep the rule order: memory first, as on phones it is the most common cause.
    return sorted(merged.values(), key=lambda c: -c.score)


def order(ranked: list[Cause], generic_unknown: Callable[[], Cause]) -> list[Cause]:
    """Matched causes (LIKELY or more) first, then `unknown`, then weak hints (device facts, guesses).

    A rule may itself answer `unknown` with what it knows (a SIGKILL with no sign of memory pressure); else
    the generic `unknown` says what was checked, when nothing matched.
    """
    matched = [c for c in ranked if c.id != "unknown" and c.score >= LIKELY]
    hints = [c for c in ranked if c.id != "unknown" and c.score < LIKELY]
    unknown = next((c for c in ranked if c.id == "unknown"), None)
    if unknown is None and not matched:
        unknown = generic_unknown()
    return [*matched, *([unknown] if unknown is not None else []), *hints]


def _unknown_fix(ev: Evidence) -> str:
    if ev.run is not None and ev.exit_code == 0:
        return "nothing to fix: the command exited with status 0 (`edgepilot probe` shows the device's state)"
    if ev.run is not None:
        return (
            "nothing known matched: rerun with the tool's verbose log (llama.cpp `-v`, `edgepilot run -v`) "
            "and "
            "compare the device with `edgepilot probe`"
        )
    return (
        "nothing known matched; rerun under the doctor to capture the whole output and the exit status: "
        "`edgepilot doctor -- <command>` (add -v/--verbose to llama.cpp for its full log)"
    )


def _no_match(ev: Evidence, checked: list[str]) -> Cause:
    """`succeeded` for a supervised command that exited 0 with nothing wrong found, else `unknown`."""
    if ev.run is not None and ev.exit_code == 0:
        run = ev.run
        evidence = [f"exit status 0 after {run.wall_seconds:.1f} s"]
        if run.peak_rss_bytes:
            evidence[0] += f", peak RSS {run.peak_rss_bytes / 2**20:.1f} MiB"
        return cause("succeeded", 0, evidence, "nothing to fix")
    return cause("unknown", 0, checked, _unknown_fix(ev))


def diagnose_evidence(ev: Evidence) -> Diagnosis:
    found: list[Cause] = []
    for rule in RULES:
        try:
            found += rule(ev)
        except Exception as exc:  # one broken rule must not take the others down
            ev.checked.append(f"rule {_rule_name(rule)} failed: {type(exc).__name__}: {exc}")
    checked = ev.checked + [f"rules: {', '.join(_rule_name(r) for r in RULES)}"]
    causes = order(rank(found), lambda: _no_match(ev, checked))
    plan = ev.__dict__.get("plan")  # only if a rule computed it
    return Diagnosis(
        causes=causes,
        checked=checked,
        exit_code=ev.exit_code,
        signal=ev.signal,
        command=ev.command,
        model=ev.model,
        run=ev.run,
        plan=plan,
    )


def diagnose(
    lines: list[str] | None = None,
    exit_code: int | None = None,
    command: list[str] | None = None,
    model: str | None = None,
    root: Path | str | None = fs.LIVE_ROOT,
    run: RunRecord | None = None,
    requested: RequestedSettings | None = None,
    budget_bytes: int | None = None,
) -> Diagnosis:
    """The library entry point: `edgepilot doctor` prints what this returns.

    root: the device (this machine, a device tree or a snapshot archive); None skips the device probe.
    """
    if root is None:
        return diagnose_evidence(gather(lines, exit_code, command, model, None, run, requested, budget_bytes))
    from edgepilot.device.root_archive import open_root

    with open_root(Path(root)) as base:  # an archive stays extracted while the rules read it
        ev = gather(lines, exit_code, command, model, base, run, requested, budget_bytes)
        return diagnose_evidence(ev)
