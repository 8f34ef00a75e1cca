"""N-gram lookup on the in-process engine (issue 42: our own draft/verify/rollback loop on llama.cpp's C API,
engine/lookup_decoding.py), on SmolLM2 with real llama.cpp:

- greedy text with lookup is the target's own; where it is not, the test shows the difference is the verify
  batch's numerics (the same tokens evaluated in one batch pick the lookup's token, one at a time the plain
  loop's), not a token our loop chose;
- at temperature 0.8 the tokens follow the target's distribution: over many seeds, the share of each
  position's most common token is the same with and without lookup (within 4 standard
  errors), while lookup drafts;
- the KV cache holds exactly the tokens reported, so a chat's next turn reuses it;
- `edgepilot run --engine inprocess --lookup` says what it kept, with llama-server's flags in its advice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from edgepilot.engine.inprocess import LlamaEngine
from edgepilot.engine.llama_binding import llama_cpp
from edgepilot.engine.lookup_decoding import NgramIndex
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.engine.speculation import Speculation
from edgepilot.plan.settings import EngineSettings
from speckit import TEXT, share_se

GREEDY = SamplerSettings(temperature=0)
SEEDS = 150
POSITIONS = 6


@pytest.fixture(scope="module")
def engine(smollm_path):
    with LlamaEngine(smollm_path, EngineSettings(n_ctx=1024, n_threads=2)) as e:
        yield e


def _top2(engine: LlamaEngine) -> list[int]:
    row = llama_cpp.llama_get_logits_ith(engine._ctx, -1)
    return [int(i) for i in np.argsort(np.ctypeslib.as_array(row, shape=(engine.load.n_vocab,)))[::-1][:2]]


def _generate(engine: LlamaEngine, prompt: list[int], n: int, lookup: bool, sampler: SamplerSettings):
    engine.speculation = Speculation("lookup") if lookup else None
    try:
        return engine.generate(prompt, n, sampler=sampler, stop_at_eog=False)
    finally:
        engine.speculation = None


def test_the_ngram_draft_is_llama_cpps():
    # pattern: the 11 last tokens and the sampled one, found earlier (never at position 0), what followed it
    tokens = [*range(30), *range(30), *range(11)]
    assert NgramIndex(list(tokens)).draft(11, n=12, m=48) == [*range(12, 30), *range(11)]
    assert NgramIndex(list(tokens)).draft(11, n=12, m=5) == []  # fewer than n would follow: none
    assert NgramIndex(list(tokens)).draft(99, n=12, m=8) == []  # no match
    assert NgramIndex(list(range(30))).draft(30, n=12, m=8) == []


def test_greedy_text_is_the_targets_or_differs_only_by_the_batchs_numerics(engine):
    prompt = engine.tokenize(f"{TEXT}\n\n{TEXT}\n\n")
    plain = _generate(engine, prompt, 64, False, GREEDY)
    looked = _generate(engine, prompt, 64, True, GREEDY)
    spec = looked.speculation
    assert spec is not None and spec.drafted > 0 and spec.accepted > 0, spec
    assert plain.n_gen == looked.n_gen == 64
    if looked.tokens == plain.tokens:
        return
    k = next(i for i, (a, b) in enumerate(zip(plain.tokens, looked.tokens, strict=True)) if a != b)
    engine.reset()
    engine.eval_prompt(prompt)
    for token in looked.tokens[:k]:
        engine.eval_prompt([token])
    one_at_a_time = _top2(engine)
    engine.reset()
    engine.eval_prompt(prompt + looked.tokens[:k])  # one batch
    batched = _top2(engine)
    assert one_at_a_time[0] == plain.tokens[k] and batched[0] == looked.tokens[k], (k, one_at_a_time, batched)
    assert set(one_at_a_time) == set(batched)  # the two nearly tied, ordered differently


def test_the_kv_cache_holds_exactly_the_reported_tokens(engine):
    prompt = engine.tokenize(f"{TEXT}\n\n{TEXT}\n\n")
    looked = _generate(engine, prompt, 40, True, GREEDY)
    assert looked.speculation.accepted > 0
    memory = llama_cpp.llama_get_memory(engine._ctx)
    # no drafted position past the last kept token is left behind
    assert llama_cpp.llama_memory_seq_pos_max(memory, 0) == len(prompt) + len(looked.tokens) - 1


def test_sampled_tokens_follow_the_targets_distribution_over_many_seeds(engine):
    # the prefix came twice before, going on two ways: the lookup drafts the later one ("the dog"), and the
    # model hesitates between the two; an acceptance rule that kept drafts too often would shift the shares
    prefix = " ".join(TEXT.split()[:20])
    cat, dog = "and the cat sleeps on the warm mat.", "and the dog runs to the old barn."
    text = f"{prefix} {cat}\n\n{prefix} {dog}\n\n{prefix}"
    prompt = engine.tokenize(text, add_special=False)
    memory = llama_cpp.llama_get_memory(engine._ctx)
    counts = {mode: [Counter() for _ in range(POSITIONS)] for mode in ("plain", "lookup")}
    drafted = accepted = 0
    engine.reset()
    engine.eval_prompt(prompt[:-1])
    for seed in range(SEEDS):
        for mode in ("plain", "lookup"):
            llama_cpp.llama_memory_seq_rm(memory, 0, len(prompt) - 1, -1)  # the prompt stays evaluated
            s = SamplerSettings(temperature=0.8, seed=seed * 2 + (mode == "lookup"))
            engine.speculation = Speculation("lookup") if mode == "lookup" else None
            try:
                out = engine.generate(prompt, POSITIONS, sampler=s, stop_at_eog=False, n_past=len(prompt) - 1)
            finally:
                engine.speculation = None
            for i, token in enumerate(out.tokens):
                counts[mode][i][token] += 1
            if out.speculation is not None:
                drafted += out.speculation.drafted
                accepted += out.speculation.accepted
    for i in range(POSITIONS):
        pa, pb, se = share_se(counts["plain"][i], counts["lookup"][i], SEEDS)
        assert abs(pa - pb) <= 4 * se, (i, pa, pb, se, counts["plain"][i], counts["lookup"][i])
    assert accepted >= SEEDS and drafted > accepted, (drafted, accepted)  # drafts kept and refused


def test_run_on_the_in_process_engine_says_what_it_kept(smollm_path, tmp_path):
    prompt = tmp_path / "rewrite.txt"
    prompt.write_text(f"{TEXT}\n\n{TEXT}\n\n")
    env = {**os.environ, "EDGEPILOT_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "50"}
    argv = [sys.executable, "-m", "edgepilot", "run", str(smollm_path), "--engine", "inprocess", "--raw",
            "--prompt-file", str(prompt), "-n", "32", "--temp", "0", "--lookup",
            "--draft-max", "16"]  # fmt: skip
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    assert got["engine"]["kind"] == "inprocess"
    spec = got["speculation"]
    assert spec["kind"] == "lookup" and 0 < spec["accepted"] <= spec["drafted"], spec
    assert spec["tokens_per_step"] > 1, spec
    args = got["llama_cpp_args"]
    assert args[args.index("--spec-type") + 1] == "ngram-simple"
    assert args[args.index("--spec-ngram-simple-size-m") + 1] == "16"
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("lookup "))
    assert "kept (" in line and len(line) <= 50, line


def test_a_draft_model_in_serves_in_process_worker_is_refused_with_where_it_runs(engine):
    assert "a draft model in serve" in str(Speculation("draft", draft=Path("d.gguf")).not_in_process())


def test_replaying_the_text_finds_each_step_the_loop_took(engine):
    """tune's lookup prediction prices each verify step (bench/spec_costs.lookup_batches): replayed on the
    text the loop generated, n-gram lookup drafts what the loop drafted, in as many steps, for every kind of
    text the trial uses (a text written again drafts a lot, a chat answer and code little)."""
    from edgepilot.bench.spec_costs import lookup_batches
    from edgepilot.bench.spec_trial import PROMPTS

    seen = {}
    for kind, (text, _) in PROMPTS.items():
        prompt = engine.tokenize(text)
        out = _generate(engine, prompt, 96, True, GREEDY)
        batches = lookup_batches(prompt, out.tokens)
        steps = out.n_gen - out.speculation.accepted
        assert (sum(batches) - len(batches), len(batches)) == (out.speculation.drafted, steps), kind
        seen[kind] = out.speculation.drafted
    assert seen["rewrite"] > 40, seen  # the paragraph written again: long drafts
