"""Both workers behind the same front: the in-process engine and llama-server (`--engine tools`, built by
`edgepilot build`). llama-server used to answer malformed bodies with a 500 and empty messages with a 200; the
front now validates every body once, for both, so each engine answers the same 400 with the same JSON error,
and refuses by name the fields neither honours."""

from __future__ import annotations

import json

import pytest
from servekit import Served, start_server, write_device

CHAT = "/v1/chat/completions"
HI = [{"role": "user", "content": "Say hi."}]


@pytest.fixture(scope="module", params=["inprocess", "tools"])
def engine(request, smollm_path, tmp_path_factory) -> Served:
    tmp = tmp_path_factory.mktemp(f"serve-{request.param}")
    write_device(tmp / "device")
    args = ["--ctx", "512", "--max-tokens", "8", "--threads", "1", "--watch-root", str(tmp / "device")]
    server = start_server(smollm_path, *args, "--engine", request.param, tmp=tmp)
    yield server
    assert server.stop() == 0, server.stderr()


def _raw(served: Served, path: str, raw: bytes) -> tuple[int, dict]:
    headers = {**served.auth(), "Content-Type": "application/json"}
    code, _, body = served.request("POST", path, raw, headers)
    return code, json.loads(body)


def _json(obj: dict) -> bytes:
    return json.dumps(obj).encode()


MALFORMED = {
    "not JSON": (CHAT, b"{this is not json"),
    "lone surrogate": (CHAT, _json({"messages": [{"role": "user", "content": "\ud800"}]})),
    "NaN temperature": (CHAT, b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}'),
    "image part": (CHAT, _json({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})),
    "empty messages": (CHAT, _json({"messages": []})),
    "completion NaN top_p": ("/v1/completions", b'{"prompt": "hi", "top_p": NaN}'),
    "n > 1": (CHAT, _json({"messages": HI, "n": 2})),
    "tools": (CHAT, _json({"messages": HI, "tools": [{"type": "function", "function": {"name": "f"}}]})),
    "tool_choice": (CHAT, _json({"messages": HI, "tool_choice": "required"})),
    "json schema": (
        CHAT,
        _json({"messages": HI, "response_format": {"type": "json_schema", "json_schema": {"schema": {}}}}),
    ),
    "logprobs": (CHAT, _json({"messages": HI, "logprobs": True, "top_logprobs": 2})),
    "logit_bias": (CHAT, _json({"messages": HI, "logit_bias": {"1": 100}})),
    "grammar": ("/v1/completions", _json({"prompt": "hi", "grammar": 'root ::= "a"'})),
    "too many messages": (CHAT, _json({"messages": HI * 257})),
}
NAMED = {"n > 1": "n", "tools": "tools", "tool_choice": "tool_choice", "json schema": "response_format"}
NAMED |= {"logprobs": "logprobs", "logit_bias": "logit_bias", "grammar": "grammar"}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_bodies_are_the_same_json_400(engine, case):
    path, raw = MALFORMED[case]
    code, body = _raw(engine, path, raw)
    assert code == 400, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert error["message"]
    if case in NAMED:
        assert error["message"].split(":")[0] == NAMED[case], error


def test_harmless_unknown_fields_are_ignored(engine):
    extras = {"user": "u-1", "presence_penalty": 0.0, "metadata": {"a": "b"}, "some_new_field": [1, 2]}
    extras |= {"tool_choice": "none", "response_format": {"type": "text"}, "logprobs": False}
    code, body = _raw(engine, CHAT, _json({"messages": HI, "max_tokens": 4, "temperature": 0, **extras}))
    assert code == 200, body
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert 1 <= body["usage"]["completion_tokens"] <= 4


def test_max_tokens_is_clamped_for_both(engine):
    code, body = _raw(engine, CHAT, _json({"messages": HI, "max_tokens": 100000, "temperature": 0}))
    assert code == 200 and body["usage"]["completion_tokens"] <= 8, body


def test_a_capped_max_tokens_is_said_for_both(engine):
    """10^9 tokens asked, the server's --max-tokens 8 given: a `notes` entry and a header say so, streamed
    (the header) or not (both); a request within the cap carries no such note."""
    headers = {**engine.auth(), "Content-Type": "application/json"}
    said = "max_tokens capped at 8"
    for path, fields in ((CHAT, {"messages": HI}), ("/v1/completions", {"prompt": "Hi"})):
        code, head, raw = engine.request("POST", path, _json({**fields, "max_tokens": 10**9}), headers)
        body = json.loads(raw)
        assert code == 200 and body["usage"]["completion_tokens"] <= 8, body
        assert any(n.startswith(said) for n in body["notes"]), body
        assert said in head["x-edgepilot-note"], head
    code, head, raw = engine.request(
        "POST", CHAT, _json({"messages": HI, "max_tokens": 10**9, "stream": True}), headers
    )
    assert code == 200 and b"data: " in raw and said in head["x-edgepilot-note"], head
    code, head, raw = engine.request("POST", CHAT, _json({"messages": HI, "max_tokens": 4}), headers)
    assert code == 200 and "x-edgepilot-note" not in head and "notes" not in json.loads(raw)


def test_a_prompt_over_the_context_is_the_same_400(engine):
    code, body = _raw(engine, "/v1/completions", _json({"prompt": "bread " * 600, "max_tokens": 4}))
    assert code == 400, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert error["code"] == "context_length_exceeded" and "512" in error["message"], error
