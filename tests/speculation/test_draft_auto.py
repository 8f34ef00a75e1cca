"""`--draft auto` and the draft tune measures by itself (issue 42, parts 1-3), on SmolLM2 quantized here by
`edgepilot quantize`'s library (an F16 reference, Q8_0 and Q4_0) and real llama.cpp.

- The same model at fewer bits is found next to the target and in the model store, the smallest first; a
  model with another tokenizer, a bigger file, a damaged file and a link are passed over.
- tune --speculation measures that draft when none is named (`--draft none`: lookup only).
- tune measures a second draft length where the prediction favours it, and keeps the faster per kind.
- run's `--draft auto` takes what the profile keeps for the text at hand (chat through the template, rewrite
  for a raw prompt) and plain generation otherwise, saying why; a kept draft that is gone gives plain.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edgepilot.cli.flags import speculation_candidates
from edgepilot.engine.draft_pick import same_model_drafts
from edgepilot.store.quantize import quantize_model
from edgepilot.tuned.profiles import read_profile, save_profile
from profilekit import make_profile

TEXT = "The farmer watches from his old wooden porch while the sun sets slowly behind the hills."


@pytest.fixture(scope="module")
def pair(smollm_path, tmp_path_factory) -> dict[str, Path]:
    """SmolLM2 as F16 (the reference), Q8_0 and Q4_0, side by side in one folder."""
    out = tmp_path_factory.mktemp("pair")
    made = quantize_model(str(smollm_path), ["Q8_0", "Q4_0"], out_dir=str(out), threads=2)
    return {"F16": Path(made.reference), **{v.type: Path(v.path) for v in made.variants}}


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def test_the_same_model_at_fewer_bits_is_found_and_nothing_else(pair, gemma_path, tmp_path):
    folder = pair["Q8_0"].parent
    assert same_model_drafts(pair["F16"]) == [pair["Q4_0"], pair["Q8_0"]]  # the smallest first
    assert same_model_drafts(pair["Q8_0"]) == [pair["Q4_0"]]  # F16 is bigger: not a draft
    assert same_model_drafts(pair["Q4_0"]) == []
    # beside a target in a folder of its own: another tokenizer, a damaged file, a link; the store's copy
    alone = tmp_path / "alone"
    alone.mkdir()
    target = alone / "target-Q8_0.gguf"
    _link_or_copy(pair["Q8_0"], target)
    _link_or_copy(gemma_path, alone / "gemma.gguf")
    (alone / "damaged.gguf").write_bytes(b"GGUF" + os.urandom(4096))
    (alone / "link-Q4_0.gguf").symlink_to(pair["Q4_0"])
    assert same_model_drafts(target) == []
    store = tmp_path / "store"
    (store / "someone__smollm").mkdir(parents=True)
    _link_or_copy(pair["Q4_0"], store / "someone__smollm" / "small.gguf")
    assert same_model_drafts(target, store) == [store / "someone__smollm" / "small.gguf"]
    assert folder != alone


def test_tune_measures_the_found_draft_unless_told_none(pair):
    candidates = speculation_candidates(str(pair["Q8_0"]), None)
    assert set(candidates) == {"lookup", "draft"} and candidates["draft"].draft == pair["Q4_0"]
    assert set(speculation_candidates(str(pair["Q8_0"]), "none")) == {"lookup"}
    assert set(speculation_candidates(str(pair["Q4_0"]), None)) == {"lookup"}  # nothing smaller


def _run(data: Path, *args: str) -> dict:
    env = {**os.environ, "EDGEPILOT_DATA_DIR": str(data), "COLUMNS": "50"}
    argv = [sys.executable, "-m", "edgepilot", "run", *args, "-n", "24", "--temp", "0", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _auto_notes(result: dict) -> list[str]:
    return [n for n in result["notes"] if n.startswith("--draft auto:")]


def test_draft_auto_takes_what_the_profile_kept_for_the_text_and_plain_otherwise(pair, tmp_path, monkeypatch):
    target, draft = pair["Q8_0"], pair["Q4_0"]
    common = (str(target), "--prompt", TEXT, "--draft", "auto", "--engine", "tools")
    nothing = _run(tmp_path, *common)
    assert nothing["speculation"] is None
    assert "no tuned profile" in _auto_notes(nothing)[0] and "--speculation" in _auto_notes(nothing)[0]

    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path))
    kept = {
        "chat": {"kind": "draft", "speedup": 1.21, "draft": str(draft)},
        "rewrite": {"kind": "lookup", "speedup": 1.4},
    }
    saved = save_profile(make_profile(target, speculation=kept))
    assert read_profile(saved).speculation == kept  # a kept draft is a valid profile

    chat = _run(tmp_path, *common)  # through the chat template: the kind "chat"
    assert chat["speculation"]["kind"] == "draft" and chat["speculation"]["drafted"] > 0, chat["speculation"]
    assert "-md" in chat["llama_cpp_args"] and str(draft) in chat["llama_cpp_args"]
    said = f"--draft auto: draft model {draft.name} (1.21x plain for chat text in tune)"
    assert _auto_notes(chat) == [said]
    assert chat["text"] == nothing["text"]  # greedy: the target's own text with its draft

    raw = _run(tmp_path, *common, "--raw")  # a raw prompt continued as text: the kind "rewrite"
    assert raw["speculation"]["kind"] == "lookup", raw["speculation"]
    assert "ngram-simple" in raw["llama_cpp_args"]

    moved = tmp_path / "moved.gguf"
    draft.rename(moved)
    try:
        gone = _run(tmp_path, *common)
    finally:
        moved.rename(draft)
    assert gone["speculation"] is None
    assert "cannot be used now" in _auto_notes(gone)[0] and draft.name in _auto_notes(gone)[0]


def test_a_kept_draft_is_read_as_input(tmp_path, monkeypatch, smollm_path):
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path))
    for damaged in (
        {"chat": {"kind": "draft", "speedup": 1.2, "draft": 7}},
        {"chat": {"kind": "draft", "speedup": 1.2, "draft": ""}},
        {"chat": {"kind": "draft", "speedup": 1.2, "draft": "a\0b"}},
        {"chat": {"kind": "draft", "speedup": 1.2, "draft": "x" * 5000}},
        {"chat": {"kind": "lookup", "speedup": 1.2, "draft": "d.gguf"}},
    ):
        path = save_profile(make_profile(smollm_path, speculation=damaged))
        assert read_profile(path) is None, damaged


def test_the_favoured_draft_length_is_measured_on_llama_server(pair):
    """tune measures the draft length the prediction favours (bench/spec_lengths.py) with a second trial."""
    from edgepilot.bench.spec_lengths import measure_favoured
    from edgepilot.bench.spec_trial import speculation_trial
    from edgepilot.engine.native_tools import find_tool
    from edgepilot.engine.speculation import Speculation
    from edgepilot.plan.settings import EngineSettings

    settings = EngineSettings(n_ctx=1024, n_threads=2)
    candidates = {"draft": Speculation("draft", pair["Q4_0"])}
    tool = find_tool("llama-server")
    trial = speculation_trial(pair["Q8_0"], settings, candidates, rounds=1, n_gen=32, tool=tool)
    assert trial.lengths_measured == [3]
    for kind in trial.kinds.values():  # as if this device's curves favoured 6 tokens a step
        c = kind.candidates["draft"]
        c.predicted, c.best_draft_max, c.best_predicted = 1.0, 6, 1.3
    before = {name: k.candidates["draft"].speedup for name, k in trial.kinds.items()}
    assert measure_favoured(trial, pair["Q8_0"], settings, candidates, tool=tool) == 6
    assert trial.lengths_measured == [3, 6]
    for name, kind in trial.kinds.items():
        c = kind.candidates["draft"]
        assert set(kind.draft_lengths) == {3, 6} and kind.draft_lengths[3] == before[name], (name, kind)
        assert c.speedup == max(kind.draft_lengths.values()) and c.drafted > 0, (name, c)
        steps = c.n_gen - c.accepted  # each verify step gives one token of the target's own
        if c.draft_max == 6:  # llama-server drafted 6 a step (up to the budget's end), never more
            assert 3 * steps < c.drafted <= 6 * steps, (name, c)
        else:
            assert c.drafted <= 3 * steps, (name, c)


def test_auto_gives_a_kept_lookup_only_a_draft_length_it_can_draft(tmp_path, monkeypatch, smollm_path):
    """llama.cpp's lookup drafts nothing shorter than its n-gram (12): `--draft auto --draft-max 4` sets the
    length of a kept draft model's runs, and a kept lookup keeps its own default instead of drafting
    nothing."""
    from edgepilot.tuned.speculation_auto import AutoSpeculation, resolve_auto

    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path))
    save_profile(make_profile(smollm_path, speculation={"rewrite": {"kind": "lookup", "speedup": 1.4}}))
    short, said = resolve_auto(AutoSpeculation(4), smollm_path, "rewrite")
    long, note = resolve_auto(AutoSpeculation(16), smollm_path, "rewrite")
    assert (short.kind, short.n_max) == ("lookup", None) and (long.kind, long.n_max) == ("lookup", 16)
    assert note == "--draft auto: n-gram lookup (1.40x plain for rewrite text in tune)"
    assert said == f"{note}; --draft-max 4 is under its 12-token n-gram: its default kept"
