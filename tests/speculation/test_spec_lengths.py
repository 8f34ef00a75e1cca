"""tune measures the draft length the prediction favours (issue 42, part 3: only the lengths predicted
fastest are measured, never a sweep): the choice and the merge on trials built by hand (the second
measurement on real llama-server is in test_draft_auto.py, beside the quantized pair it needs)."""

from __future__ import annotations

from pathlib import Path

from edgepilot.bench.spec_lengths import favoured_length, merge_length
from edgepilot.bench.spec_trial import SpecCandidate, SpecKind, SpecTrial
from edgepilot.engine.speculation import Speculation
from edgepilot.tuned.profiles import read_profile, save_profile
from profilekit import make_profile

DRAFT = {"draft": Speculation("draft", Path("d.gguf"))}


def _kind(
    speedup: float, predicted: float | None, best: int | None, best_predicted: float | None
) -> SpecKind:
    c = SpecCandidate(40 * speedup, speedup, 0.8, 2.5, 30, 24, 64, predicted, best, [], best_predicted)
    kind = SpecKind(40.0, {"draft": c})
    kind.kept = "draft" if speedup >= 1.05 else None
    return kind


def _trial(**kinds: SpecKind) -> SpecTrial:
    return SpecTrial(3, 64, kinds, 10.0, "d.gguf", lengths_measured=[3])


def test_the_favoured_length_is_the_one_most_kinds_predict_5_percent_faster():
    trial = _trial(
        chat=_kind(1.1, 1.1, 5, 1.3), rewrite=_kind(1.2, 1.2, 5, 1.25), code=_kind(1.0, 1.0, 2, 1.2)
    )
    assert favoured_length(trial, DRAFT) == 5  # two kinds against one
    assert favoured_length(_trial(chat=_kind(1.1, 1.1, 5, 1.12)), DRAFT) is None  # under 5 % more
    assert favoured_length(_trial(chat=_kind(1.1, 1.1, 3, 1.1)), DRAFT) is None  # the length measured
    assert favoured_length(_trial(chat=_kind(1.1, None, None, None)), DRAFT) is None  # not predicted
    assert favoured_length(trial, {"lookup": Speculation("lookup")}) is None  # no draft model
    tie = _trial(chat=_kind(1.1, 1.0, 2, 1.2), code=_kind(1.1, 1.0, 6, 1.4))
    assert favoured_length(tie, DRAFT) == 6  # a tie: the larger predicted gain


def test_each_kind_keeps_the_length_that_measured_faster_and_decides_again(
    smollm_path, tmp_path, monkeypatch
):
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path))  # the profile saved below is this test's own
    trial = _trial(chat=_kind(1.02, 1.1, 5, 1.3), code=_kind(1.2, 1.2, 5, 1.3))
    again = _trial(chat=_kind(1.15, None, None, None), code=_kind(1.1, None, None, None))
    assert merge_length(trial, again, 5) == ["chat"]
    chat, code = trial.kinds["chat"], trial.kinds["code"]
    assert chat.candidates["draft"].draft_max == 5 and chat.candidates["draft"].predicted == 1.3
    assert chat.kept == "draft" and chat.why == "draft (5) 1.15x plain: kept"  # under 5 % before
    assert code.candidates["draft"].draft_max is None and code.kept == "draft"  # the default stood
    assert trial.lengths_measured == [3, 5] and trial.seconds == 20.0
    assert chat.draft_lengths == {3: 1.02, 5: 1.15} and code.draft_lengths == {3: 1.2, 5: 1.1}
    kept = trial.kept()
    assert kept["chat"]["draft_max"] == 5 and "draft_max" not in kept["code"]
    path = save_profile(make_profile(smollm_path, speculation=kept))
    assert read_profile(path).speculation == kept  # the length is kept in the profile and read back
