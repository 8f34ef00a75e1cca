"""A chat that outgrows its context slides instead of starting over (issue 41, part 1): ten short questions to
SmolLM2 in a 512-token context, on both engines. Before, the first turn after the context filled processed the
whole kept history again (400 tokens, 9x a normal turn's first token); now the turns kept slide down in the
cache and only the new message is processed, and the context-full note is said once.

Gemma 3's sliding-window cache cannot shift unless it is as large as the context: there the chat says so once
and processes the kept turns again, as before."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from edgepilot.engine.kv_slide import Move, kept_after, plan_moves

QUESTIONS = [
    "What is a battery?",
    "Why do phones get warm?",
    "What is RAM?",
    "Name a planet.",
    "What is rain?",
    "Why is the sky blue?",
    "What is a cat?",
    "Name a fruit.",
    "What is a river?",
    "What is the sun?",
]


def _chat(
    model: Path, *args: str, engine: str = "inprocess", questions: list[str] = QUESTIONS
) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "-m", "edgepilot", "chat", str(model), *args, "--temp", "0", "--json",
         "--engine", engine],
        input="\n".join(questions) + "\n", capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), done.stderr


@pytest.mark.parametrize("engine", ["inprocess", "tools"])
def test_a_full_context_slides_and_the_next_turn_processes_only_its_message(smollm_path, engine):
    result, said = _chat(smollm_path, "--ctx", "512", "-n", "60", engine=engine)
    turns = result["turns"]
    assert len(turns) == len(QUESTIONS)
    first_drop = next(i for i, t in enumerate(turns) if t["dropped"])
    assert first_drop >= 2, [t["n_prompt"] for t in turns]
    normal = statistics.median(t["n_prompt_new"] for t in turns[1:first_drop])
    for t in turns[first_drop:]:
        if t["dropped"]:
            # only its message (and the template around it) is new: the kept turns slid down
            assert t["n_slid"] > 0 and t["n_prompt_new"] <= 2 * normal, (t, normal)
            shift = t["context_shift"]
            assert shift["dropped"] > 0 and shift["kept"] == t["n_reused"] and shift["recomputed"] == 0, t
        else:
            assert t["context_shift"] is None
        assert t["n_prompt_new"] + t["n_reused"] == t["n_prompt"]
    full = [n for t in turns for n in t["notes"] if "context full" in n]
    assert len(full) == 1 and "slid down" in full[0], full
    assert said.count("context full") == 1, said[-2000:]


def test_a_sliding_window_cache_says_once_that_it_cannot_slide(gemma_path):
    # ubatch 64: Gemma 3's window cache (512 + 64 cells, padded) is smaller than the 1024-token context;
    # the base model's answers are short, so the questions carry the length that fills it
    longer = [f"{q} Phones keep their memory small and their batteries warm. " * 4 for q in QUESTIONS]
    result, said = _chat(gemma_path, "--ctx", "1024", "--ubatch", "64", "-n", "64", questions=longer)
    turns = result["turns"]
    dropped = [t for t in turns if t["dropped"]]
    assert dropped, [t["n_prompt"] for t in turns]
    assert all(t["n_slid"] == 0 for t in turns)
    assert all(t["context_shift"]["recomputed"] > 0 for t in dropped), [t["context_shift"] for t in dropped]
    full = [n for t in turns for n in t["notes"] if "context full" in n]
    assert len(full) == 1 and "cannot slide" in full[0] and "sliding-window" in full[0], full


def test_moves_follow_llama_servers_chunk_reuse():
    system, old, kept, reply = [1, 2, 3], list(range(100, 140)), list(range(200, 230)), list(range(300, 320))
    cached = [*system, *old, *kept, *reply]
    new = [*system, *kept, *reply, 7, 8, 9]
    moves = plan_moves(cached, new, 3, len(new) - 1)
    assert moves == [Move(src=43, dst=3, n=50)]
    assert kept_after(moves, 3) == 53
    # a run shorter than the threshold is processed again; one token is always left to process
    assert plan_moves(cached, [*system, *kept[:10], 5], 3, 13) == []
    assert kept_after(plan_moves(cached, [*system, *kept], 3, 32), 3) == 32
