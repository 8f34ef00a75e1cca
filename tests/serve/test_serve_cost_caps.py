"""A real `edgepilot serve` (SmolLM2, ctx 512) under requests built to cost the most: 2,001 tiny messages
(65 KiB) once held the one engine for 57 s while a "Say hi." waited 54 s. Now the message and character caps
refuse such a request before it may queue, and the largest request that passes every cap leaves a small one
waiting less than 5 s.

What the largest allowed request costs the engine is its prompt tokens (--max-prompt-tokens, the context by
default) and its answer (--max-tokens): on this 2-core machine shared with other jobs, a full 512-token prompt
alone takes 6-30 s, so the server here is given the caps that bound it to a couple of seconds, and one thread
(two compute threads on two busy cores wait for each other at every barrier: 10x slower). Here the small
request may take the short lane or wait for the large one; with the default caps, the short lane is what
answers it in time (tests/serve/test_short_lane.py)."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest
from servekit import Served, start_server, write_device

N_CTX = 512
MAX_TOKENS = 16
MAX_PROMPT_TOKENS = 128
MAX_CHARS = 32 * N_CTX  # the derived --max-prompt-chars
MAX_MESSAGES = 256  # the default --max-messages
SMALL_DEADLINE = 5.0  # the bound


@pytest.fixture(scope="module")
def capped(smollm_path, tmp_path_factory) -> Served:
    tmp = tmp_path_factory.mktemp("serve-caps")
    write_device(tmp / "device")
    args = ["--ctx", str(N_CTX), "--max-tokens", str(MAX_TOKENS), "--watch-root", str(tmp / "device")]
    args += ["--max-prompt-tokens", str(MAX_PROMPT_TOKENS), "--threads", "1"]
    server = start_server(smollm_path, *args, tmp=tmp)
    yield server
    assert server.stop() == 0, server.stderr()


def _maximal(seed: int) -> list[dict]:
    """MAX_MESSAGES messages of MAX_CHARS characters in all, of random letters (many tokens per character)."""
    rng = random.Random(seed)
    messages = []
    for i in range(MAX_MESSAGES):
        role = "user" if i % 2 == 0 else "assistant"
        size = MAX_CHARS // MAX_MESSAGES - len(role)
        text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(size))
        messages.append({"role": role, "content": text})
    return messages


def test_the_hostile_request_is_refused_before_it_queues(capped):
    hostile = {"messages": [{"role": "user", "content": "hi"}] * 2001, "max_tokens": MAX_TOKENS}
    assert len(json.dumps(hostile)) > 60_000
    code, body, took = capped.chat(hostile)
    assert code == 400, body
    assert body["error"]["code"] == "request_too_large" and "--max-messages" in body["error"]["message"]
    assert took < 5, took
    big = {"messages": [{"role": "user", "content": "x" * (MAX_CHARS + 1)}]}
    code, body, _ = capped.chat(big)
    assert code == 400 and "--max-prompt-chars" in body["error"]["message"], body
    assert capped.status()["max_messages"] == MAX_MESSAGES


def test_a_small_request_is_answered_while_the_largest_allowed_one_runs(capped):
    maximal = {"messages": _maximal(1), "max_tokens": MAX_TOKENS}
    assert sum(len(m["role"]) + len(m["content"]) for m in maximal["messages"]) == MAX_CHARS
    first: list[tuple[int, dict, float]] = []
    runner = threading.Thread(target=lambda: first.append(capped.chat(maximal)))
    runner.start()
    deadline = time.monotonic() + 10
    while capped.status()["requests"]["in_flight"] == 0 and runner.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    # while it is in flight, more of the hostile kind are refused at once, without waiting their turn
    code, body, took = capped.chat({"messages": maximal["messages"] * 8})
    assert code == 400 and took < 2, (body, took)
    small = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8}
    code, body, waited = capped.chat(small)
    runner.join(120)
    assert code == 200, body
    assert first and first[0][0] == 200, first
    _, big_body, big_took = first[0]
    assert big_body["usage"]["prompt_tokens"] <= MAX_PROMPT_TOKENS
    assert "dropped" in " ".join(big_body.get("notes", []))
    assert waited < SMALL_DEADLINE, (
        f"the small request waited {waited:.1f} s (the large one took {big_took:.1f} s)"
    )


def test_a_completion_over_the_token_cap_is_a_400(capped):
    code, _, raw = capped.request(
        "POST", "/v1/completions", {"prompt": "bread " * 300, "max_tokens": 4}, capped.auth()
    )
    error = json.loads(raw)["error"]
    assert code == 400 and error["code"] == "request_too_large" and "--max-prompt-tokens" in error["message"]
