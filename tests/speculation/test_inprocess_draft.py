"""A draft model on the in-process engine (issue 42: llama.cpp's draft-simple proposing in this process,
engine/draft_decoding.py, verified by the same loop as n-gram lookup), with real llama.cpp on SmolLM2 drafting
for itself (the vocabulary check passes; a same-model draft agrees on nearly every token):

- greedy text with the draft is the target's own, or differs only by the verify batch's numerics;
- at temperature 0.8 each position's most common token has the same share with and without the draft over
  many seeds, while drafts are both kept and refused;
- the draft's cache follows the target's after a rollback and after a new context size;
- `edgepilot run --engine inprocess --draft` says what it kept, with llama-server's flags in its advice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from edgepilot.engine.draft_decoding import DraftModel
from edgepilot.engine.inprocess import LlamaEngine
from edgepilot.engine.llama_binding import llama_cpp
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.engine.speculation import Speculation
from edgepilot.plan.settings import EngineSettings
from speckit import TEXT, share_se

GREEDY = SamplerSettings(temperature=0)
SETTINGS = EngineSettings(n_ctx=1024, n_threads=2)


@pytest.fixture(scope="module")
def engine(smollm_path):
    with LlamaEngine(smollm_path, SETTINGS) as e:
        e.drafter = DraftModel(smollm_path, SETTINGS)
        yield e


def _generate(engine: LlamaEngine, prompt: list[int], n: int, draft: bool, sampler: SamplerSettings, **kw):
    drafter, engine.drafter = engine.drafter, engine.drafter if draft else None
    engine.speculation = Speculation("draft", draft=engine.model_path) if draft else None
    try:
        return engine.generate(prompt, n, sampler=sampler, stop_at_eog=False, **kw)
    finally:
        engine.speculation, engine.drafter = None, drafter


def test_greedy_text_is_the_targets_and_the_same_model_agrees_with_itself(engine):
    prompt = engine.tokenize("Write three short sentences about the sea.\n\n")
    plain = _generate(engine, prompt, 40, False, GREEDY)
    drafted = _generate(engine, prompt, 40, True, GREEDY)
    spec = drafted.speculation
    assert spec is not None and spec.kind == "draft" and spec.drafted > 0, spec
    assert spec.acceptance_rate is not None and spec.acceptance_rate >= 0.9, spec
    assert spec.tokens_per_step > 2, spec  # up to 3 drafted + 1 chosen a step
    assert drafted.n_gen == plain.n_gen == 40
    same = sum(a == b for a, b in zip(plain.tokens, drafted.tokens, strict=True))
    if same < 40:  # a near tie the batch's rounding tipped (test_inprocess_lookup.py shows how that looks)
        k = next(i for i, (a, b) in enumerate(zip(plain.tokens, drafted.tokens, strict=True)) if a != b)
        assert k > 0 and plain.tokens[:k] == drafted.tokens[:k], (k, plain.tokens, drafted.tokens)
    # the target's cache holds exactly the kept tokens, the draft's no more than the text plus its proposals
    memory = llama_cpp.llama_get_memory(engine._ctx)
    assert llama_cpp.llama_memory_seq_pos_max(memory, 0) == len(prompt) + len(drafted.tokens) - 1
    text = prompt + drafted.tokens
    cached = engine.drafter._cached
    kept = next((i for i, (a, b) in enumerate(zip(cached, text, strict=False)) if a != b), len(cached))
    assert kept >= len(text) - 4, (kept, len(text))


def test_the_draft_follows_a_new_context_and_a_new_prompt(smollm_path):
    with LlamaEngine(smollm_path, SETTINGS) as e:
        e.drafter = DraftModel(smollm_path, SETTINGS)
        e.speculation = Speculation("draft", draft=smollm_path)
        first = e.generate(e.tokenize(f"{TEXT}\n\n"), 12, sampler=GREEDY, stop_at_eog=False)
        e.reconfigure(EngineSettings(n_ctx=512, n_threads=2))  # the draft's context follows, emptied
        assert llama_cpp.llama_n_ctx(e.drafter.engine._ctx) == 512 and e.drafter._cached == []
        second = e.generate(e.tokenize("Name three colours.\n"), 12, sampler=GREEDY, stop_at_eog=False)
    for out in (first, second):
        spec = out.speculation
        assert out.n_gen == 12 and spec.drafted > 0 and spec.accepted > 0, spec


def test_sampled_tokens_follow_the_targets_distribution_over_many_seeds(engine):
    seeds, positions = 100, 5
    story = "Once upon a time, in a small village by the sea, there lived"
    prompt = engine.tokenize(story, add_special=False)
    memory = llama_cpp.llama_get_memory(engine._ctx)
    counts = {mode: [Counter() for _ in range(positions)] for mode in ("plain", "draft")}
    drafted = accepted = 0
    engine.reset()
    engine.eval_prompt(prompt[:-1])
    for seed in range(seeds):
        for mode in ("plain", "draft"):
            llama_cpp.llama_memory_seq_rm(memory, 0, len(prompt) - 1, -1)  # the prompt stays evaluated
            s = SamplerSettings(temperature=0.8, seed=seed * 2 + (mode == "draft"))
            out = _generate(engine, prompt, positions, mode == "draft", s, n_past=len(prompt) - 1)
            for i, token in enumerate(out.tokens):
                counts[mode][i][token] += 1
            if out.speculation is not None:
                drafted += out.speculation.drafted
                accepted += out.speculation.accepted
    for i in range(positions):
        pa, pb, se = share_se(counts["plain"][i], counts["draft"][i], seeds)
        assert abs(pa - pb) <= 4 * se, (i, pa, pb, se, counts["plain"][i], counts["draft"][i])
    assert accepted >= seeds and drafted > accepted, (drafted, accepted)  # drafts kept and refused


def test_run_on_the_in_process_engine_says_what_the_draft_kept(smollm_path, tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Write three short sentences about the sea.\n\n")
    env = {**os.environ, "EDGEPILOT_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "50"}
    argv = [sys.executable, "-m", "edgepilot", "run", str(smollm_path), "--engine", "inprocess", "--raw",
            "--prompt-file", str(prompt), "-n", "24", "--temp", "0", "--draft", str(smollm_path),
            "--draft-max", "4"]  # fmt: skip
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    assert got["engine"]["kind"] == "inprocess"
    spec = got["speculation"]
    assert spec["kind"] == "draft" and 0 < spec["accepted"] <= spec["drafted"], spec
    assert spec["tokens_per_step"] > 2, spec
    args = got["llama_cpp_args"]
    assert args[args.index("-md") + 1] == str(smollm_path)
    assert args[args.index("--spec-type") + 1] == "draft-simple"
    assert args[args.index("--spec-draft-n-max") + 1] == "4"
    assert any(n.startswith("the memory plan counts draft model ") for n in got["notes"]), got["notes"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("draft "))
    assert "kept (" in line and len(line) <= 50, line
