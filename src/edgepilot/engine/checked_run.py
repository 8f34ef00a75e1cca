"""A check's verdict from one child run with a deadline: what a crash-isolated check (the GPU driver check,
the CPU library check) concludes, in one vocabulary, and when it concludes nothing.

Verdicts: `ok` (it ran to its end), `crashed` (a signal: SIGSEGV, SIGILL, SIGABRT, ...), `failed` (an error
exit), `slow` (still working at its deadline, twice: using CPU, as a driver compiling its pipelines on a cold
cache or a loaded machine does), `hung` (at its deadline it had used no CPU over the last window),
`not-run` (it could not be started, or there was nothing to check with). A timeout is not a measurement: a
check that runs past its deadline is run once more with a longer one (RETRY_FACTOR), and `slow` and `hung`
are never final (needs_recheck): whoever remembers a verdict keeps it with `checked_at` and checks such a
one again (tune, `probe --check-gpu`). In the retry, a child that uses no CPU for the first deadline's length
is hung: it is not waited for to the end.

    run_checked(argv, deadline, env, retry_deadline=None, on_retry=None) -> CheckedRun
    outcome_of(result) -> verdict of one RunResult;  needs_recheck(outcome) -> bool
    checked_at_now() -> "2026-12-06T05:01:02+0000";  deadline_from_env(name, default) -> seconds
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from edgepilot.engine.gpu_run import RunResult, run_bounded

OUTCOMES = ("ok", "slow", "crashed", "hung", "failed", "not-run")
FINAL = frozenset({"ok", "crashed", "failed"})  # a remembered verdict that holds until its inputs change
TIMEOUTS = frozenset({"slow", "hung"})  # never final: checked again
RETRY_FACTOR = 3.0
MAX_DEADLINE_S = 3600.0


@dataclass
class CheckedRun:
    """The verdict of a check and the run(s) it took."""

    outcome: str  # one of OUTCOMES
    result: RunResult  # the run the verdict is of (the retry, when there was one)
    attempts: list[RunResult] = field(default_factory=list)  # every run, first one first
    deadlines: list[float] = field(default_factory=list)  # the deadline of each

    @property
    def seconds(self) -> float:
        """Wall time of every attempt."""
        return sum(r.seconds for r in self.attempts)

    @property
    def retried(self) -> bool:
        return len(self.attempts) > 1

    def timeline(self) -> str:
        """What the attempts did, in words: "the first run was still busy at its 60 s deadline (41.2 s of
        CPU); the second ended in 75.3 s"."""
        parts = []
        for n, (r, limit) in enumerate(zip(self.attempts, self.deadlines, strict=False)):
            which = ("the first run", "the second")[min(n, 1)]
            cpu = f" ({r.cpu_seconds:.1f} s of CPU)" if r.cpu_seconds is not None else ""
            if r.stalled:
                parts.append(f"{which} used no CPU for {self.deadlines[0]:g} s{cpu}")
            elif r.hung and r.busy:
                parts.append(f"{which} was still busy at its {limit:g} s deadline{cpu}")
            elif r.hung:
                parts.append(f"{which} made no progress by its {limit:g} s deadline{cpu}")
            else:
                parts.append(f"{which} ended in {r.seconds:.1f} s")
        return "; ".join(parts)


def outcome_of(result: RunResult) -> str:
    """One run's verdict: its end (ok, crashed, failed), or at a deadline slow (busy) or hung (no progress,
    or progress unknown)."""
    if result.start_error is not None:
        return "not-run"
    if result.hung:
        return "slow" if result.busy and not result.stalled else "hung"
    if result.signal is not None:
        return "crashed"
    return "failed" if result.returncode != 0 else "ok"


def needs_recheck(outcome: str | None) -> bool:
    """A remembered verdict to check again rather than trust: a timeout (slow, hung) or anything unknown."""
    return outcome not in FINAL


def checked_at_now() -> str:
    """When a check was made, as kept with its verdict: local time, ISO 8601 with the offset."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def deadline_from_env(name: str, default: float) -> float:
    """A deadline in seconds from the environment variable `name` (a positive number), else `default`."""
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw)
    except ValueError:
        return default
    return min(value, MAX_DEADLINE_S) if math.isfinite(value) and value > 0 else default


def run_checked(
    argv: list[str],
    deadline: float,
    env: dict[str, str] | None = None,
    *,
    retry_deadline: float | None = None,
    on_retry: Callable[[str], None] | None = None,
) -> CheckedRun:
    """Run a check's child to its end or `deadline`; a run that times out is run once more with
    `retry_deadline` (default RETRY_FACTOR x deadline), given up early as hung when it uses no CPU for
    `deadline` seconds. Never raises for what the child does. on_retry hears one line before the retry."""
    first = run_bounded(argv, deadline, env)
    got = CheckedRun(outcome_of(first), first, [first], [deadline])
    if got.outcome not in TIMEOUTS:
        return got
    longer = retry_deadline if retry_deadline is not None else deadline * RETRY_FACTOR
    if on_retry is not None:
        how = "still busy (a slow start)" if got.outcome == "slow" else "with no progress"
        on_retry(
            f"the check ran past its {deadline:g} s deadline {how}: trying once more, up to {longer:g} s"
        )
    second = run_bounded(argv, longer, env, stall_s=deadline)
    got.attempts.append(second)
    got.deadlines.append(longer)
    got.result = second
    got.outcome = outcome_of(second)
    if got.outcome == "hung" and first.busy and second.busy is None:
        got.outcome = "slow"  # busy the first time, progress unreadable the second: not a hang shown
    return got
