"""A chat request's prompt within its budget, on the real SmolLM2: the same prompt fit_conversation makes,
at a cost bounded by the budget (2,001 tiny messages once held the engine for 57 s), and a completion over
--max-prompt-tokens refused before any prompt processing."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from edgepilot.engine.conversation import fit_conversation
from edgepilot.engine.inprocess import LlamaEngine
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.plan.settings import EngineSettings
from edgepilot.serve.generation import Generator, Job, OverTokenCap
from edgepilot.serve.prompt_fit import fit_within, message_overhead

N_CTX = 512


@pytest.fixture(scope="module")
def engine(smollm_path):
    with LlamaEngine(smollm_path, EngineSettings(n_ctx=N_CTX, n_threads=2)) as e:
        yield e


def _chat(n: int, words: int, system: bool = True) -> list[tuple[str, str]]:
    out = [("system", "Be brief.")] if system else []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        out.append((role, f"{i} " + "bread " * words))
    return out


@pytest.mark.parametrize(
    ("n", "words", "system"), [(3, 2, True), (40, 10, True), (41, 30, False), (9, 60, True)]
)
def test_the_same_prompt_as_fit_conversation(engine, n, words, system):
    messages = _chat(n, words, system)
    slow = fit_conversation(engine, messages, N_CTX, 16)
    fast = fit_within(engine, messages, N_CTX, 16, message_overhead(engine))
    assert fast.tokens == slow.tokens and fast.messages == slow.messages and fast.dropped == slow.dropped
    assert fast.notes == slow.notes


def test_thousands_of_tiny_messages_cost_the_budget_not_the_request(engine):
    messages = [("user" if i % 2 == 0 else "assistant", "hi") for i in range(2001)]
    t0 = time.thread_time()  # CPU time: a busy machine does not stretch it
    r = fit_within(engine, messages, N_CTX, 16, message_overhead(engine))
    took = time.thread_time() - t0
    assert len(r.tokens) <= N_CTX - 16 and r.messages[-1] == messages[-1]
    assert r.dropped == 2001 - len(r.messages) and "dropped the" in r.notes[0]
    assert took < 2.0, took  # was tens of seconds: a render of the whole conversation per dropped turn


def test_a_completion_over_the_token_cap_is_refused_before_processing(engine):
    gen = Generator(engine, max_prompt_tokens=64)
    try:
        job = Job(None, "bread " * 200, 4, SamplerSettings())
        with pytest.raises(OverTokenCap, match=r"at most 64 .*--max-prompt-tokens"):
            asyncio.run(gen.complete(job, threading.Event()))
        assert gen.stats.prompt_tokens == 0  # nothing reached the engine's decode
        chat = Job([("user", "bread " * 30)] * 6, "", 4, SamplerSettings(temperature=0))
        outcome = asyncio.run(gen.complete(chat, threading.Event()))
        assert outcome.n_prompt <= 64 and any("dropped" in n for n in outcome.notes)
    finally:
        gen.close()
