"""The draft length the prediction favours, measured (issue 42, part 3).

The trial (bench/spec_trial.py) measures a draft model at llama-server's default draft length; its acceptance
and this device's cost curves then predict every length (bench/spec_costs.py). Where a length other than the
measured one is predicted at least FAVOURED_GAIN faster, for some kind of text, tune measures that length too,
against plain in the same alternating rounds, and each kind of text keeps whichever length measured faster:
only the lengths the prediction favours are measured, never a sweep of all of them.

    favoured_length(trial, candidates) -> int | None
    merge_length(trial, again, length)  -> kinds whose draft is now the favoured length
    measure_favoured(trial, model, settings, candidates, progress, tool) -> the length measured, or None
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from edgepilot.bench.spec_trial import SpecTrial, decide_kept
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.speculation_memory import DEFAULT_N_MAX

FAVOURED_GAIN = 1.05  # a predicted gain worth a second measurement (tune keeps 5 %+ gains)


def favoured_length(trial: SpecTrial, candidates: dict[str, Any]) -> int | None:
    """The draft length the prediction favours over the one measured, by most kinds of text (the larger
    predicted gain breaks a tie); None where it favours the measured one or was not predicted."""
    spec = candidates.get("draft")
    if spec is None:
        return None
    measured = spec.n_max or DEFAULT_N_MAX["draft"]
    votes: Counter[int] = Counter()
    gains: dict[int, float] = {}
    for kind in trial.kinds.values():
        c = kind.candidates.get("draft")
        if c is None or not c.best_draft_max or c.best_draft_max == measured:
            continue
        if c.predicted is None or c.best_predicted is None or c.best_predicted < c.predicted * FAVOURED_GAIN:
            continue
        votes[c.best_draft_max] += 1
        gains[c.best_draft_max] = max(gains.get(c.best_draft_max, 0.0), c.best_predicted)
    if not votes:
        return None
    return max(votes, key=lambda n: (votes[n], gains[n]))


def merge_length(trial: SpecTrial, again: SpecTrial, length: int) -> list[str]:
    """Each kind of text takes the favoured length's draft where it measured faster against its own plain;
    what is kept is decided again. The kinds that changed are returned."""
    changed = []
    for name, kind in trial.kinds.items():
        old, new = kind.candidates.get("draft"), again.kinds.get(name)
        new_draft = new.candidates.get("draft") if new is not None else None
        if old is None or new_draft is None:
            continue
        new_draft.draft_max = length
        new_draft.predicted = old.best_predicted if old.best_draft_max == length else None
        new_draft.best_draft_max, new_draft.best_predicted = old.best_draft_max, old.best_predicted
        kind.draft_lengths = {old.draft_max or DEFAULT_N_MAX["draft"]: old.speedup, length: new_draft.speedup}
        if new_draft.speedup > old.speedup:
            kind.candidates["draft"] = new_draft
            changed.append(name)
        decide_kept(kind)
    trial.seconds = round(trial.seconds + again.seconds, 1)
    trial.lengths_measured = sorted({*trial.lengths_measured, length})
    return changed


def measure_favoured(
    trial: SpecTrial,
    model: Path,
    settings: EngineSettings,
    candidates: dict[str, Any],
    progress: Callable[[str], None] | None = None,
    tool: Path | None = None,
) -> int | None:
    """Measure the favoured draft length against plain, as the trial measured the others, and merge it; the
    length measured, or None when the prediction favoured none."""
    from edgepilot.bench.spec_trial import speculation_trial

    length = favoured_length(trial, candidates)
    if length is None:
        return None
    if progress is not None:
        progress(f"speculation: the draft at {length} tokens a step, the length predicted fastest")
    spec = replace(candidates["draft"], n_max=length)
    again = speculation_trial(model, settings, {"draft": spec}, trial.rounds, trial.n_gen, progress, tool)
    merge_length(trial, again, length)
    return length
