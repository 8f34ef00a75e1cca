"""The server keeps the last request's KV cache: the next chat turn of a conversation processes only what is
new (usage.prompt_tokens_details.cached_tokens, the status page), and a conversation longer than the
context (512 here) is answered with its oldest turns dropped and a note, on both engines: on llama-server
the front fits the conversation (serve/native_fit.py; before, llama-server's own 400)."""

from __future__ import annotations

import json
import time

import pytest
from servekit import start_server, write_device

from edgepilot.serve.front import STATS_TTL

SYSTEM = {"role": "system", "content": "You answer briefly."}


def chat(served, messages, max_tokens=8):
    code, headers, body = served.request(
        "POST",
        "/v1/chat/completions",
        {"messages": messages, "max_tokens": max_tokens, "temperature": 0},
        served.auth(),
    )
    assert code == 200, body
    return headers, json.loads(body)


def test_next_turn_reuses_the_cached_prefix(served):
    first = [SYSTEM, {"role": "user", "content": "Name a large animal that lives in the sea."}]
    _, one = chat(served, first)
    reply = one["choices"][0]["message"]["content"]
    following = [
        *first,
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "And a small one?"},
    ]
    _, two = chat(served, following)
    usage = two["usage"]
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    assert cached >= one["usage"]["prompt_tokens"], (one["usage"], usage)
    assert usage["prompt_tokens"] - cached < 30  # only the new turn was processed
    assert two["timings"]["cache_n"] == cached
    # the status page caches the worker's figures for STATS_TTL (1 s): a status read just before may show
    # the previous request's still, so wait past it
    time.sleep(STATS_TTL + 0.1)
    engine = served.status()["engine"]
    assert engine["last_cached_tokens"] == cached and engine["cached_tokens"] >= cached


@pytest.fixture(scope="module", params=["inprocess", "tools"])
def either(request, smollm_path, tmp_path_factory):
    """The shared in-process server, or llama-server behind the front at the same context."""
    if request.param == "inprocess":
        yield request.param, request.getfixturevalue("served")
        return
    tmp = tmp_path_factory.mktemp("serve-native-cache")
    write_device(tmp / "device")
    args = ["--ctx", "512", "--engine", "tools", "--watch-root", str(tmp / "device")]
    server = start_server(smollm_path, *args, tmp=tmp)
    yield request.param, server
    assert server.stop() == 0, server.stderr()


def test_overflowing_conversation_drops_old_turns_with_a_note(either):
    _, served = either
    filler = "Tell me about the history of bread, from the first flatbreads to modern bakeries. " * 3
    messages = [SYSTEM]
    for i in range(8):  # about 8 x 60 tokens of history: more than the 512-token context
        messages += [{"role": "user", "content": f"{i}. {filler}"}, {"role": "assistant", "content": filler}]
    messages.append({"role": "user", "content": "Say hello."})
    headers, body = chat(served, messages)
    assert body["choices"][0]["message"]["content"] is not None
    assert body["usage"]["prompt_tokens"] < 512
    assert any("context full: dropped" in n for n in body["notes"]), body
    assert "context full" in headers["x-edgepilot-note"]
    # a raw completion that does not fit is still refused clearly
    code, _, raw = served.request(
        "POST", "/v1/completions", {"prompt": filler * 10, "max_tokens": 4}, served.auth()
    )
    assert code == 400 and json.loads(raw)["error"]["code"] == "context_length_exceeded"


def test_a_conversation_past_the_context_slides_instead_of_starting_over(either):
    """Issue 41: when a growing conversation passes the context, the turns kept slide down in the worker's
    cache: the request processes only its new message, and says what it dropped (`context_shift` from
    edgepilot's worker, a note from both)."""
    engine, served = either
    messages = [SYSTEM]
    slid = None
    for i in range(16):
        messages.append({"role": "user", "content": f"Question {i}: name an animal and say where it lives."})
        _, body = chat(served, messages, max_tokens=24)
        messages.append({"role": "assistant", "content": body["choices"][0]["message"]["content"]})
        if any("context full: dropped" in n for n in body.get("notes", [])):
            slid = body
            break
    assert slid is not None, "the conversation never passed the 512-token context"
    usage = slid["usage"]
    kept = usage["prompt_tokens_details"]["cached_tokens"]
    assert kept > 200 and usage["prompt_tokens"] - kept < 40, usage  # only the new message was processed
    if engine == "inprocess":
        shift = slid["context_shift"]
        assert shift["dropped"] > 0 and shift["recomputed"] == 0 and shift["kept"] == kept, (shift, usage)
