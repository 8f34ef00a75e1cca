"""What the front passes to either worker: the body rebuilt from what was parsed (honoured fields only,
max_tokens clamped, text messages), or a 400 naming the field or the cap, before the request may queue."""

from __future__ import annotations

import json

import pytest

from edgepilot.serve.admission import Caps, admit, derived_max_chars
from edgepilot.serve.request_body import InvalidRequest, OverCap

CAPS = Caps(max_messages=4, max_chars=100, max_tokens=32)
CHAT = "/v1/chat/completions"


def _admit(path: str, body: dict) -> dict:
    return json.loads(admit(path, json.dumps(body).encode(), CAPS))


def test_a_chat_body_is_passed_on_rebuilt():
    body = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": t} for t in "ab"]}],
        "max_tokens": 1000,
        "temperature": 0.0,
        "seed": 3,
        "stop": "\n",
        "stream": True,
        "stream_options": {"include_usage": True},
        "user": "ignored",
        "presence_penalty": 1.0,
        "n_predict": 9999,  # llama-server would honour this one: it never reaches it
    }
    assert _admit(CHAT, body) == {
        "messages": [{"role": "user", "content": "ab"}],
        "max_tokens": 32,
        "stream": True,
        "temperature": 0.0,
        "seed": 3,
        "stop": ["\n"],
        "stream_options": {"include_usage": True},
    }


def test_a_completion_body_is_passed_on_rebuilt():
    assert _admit("/v1/completions", {"prompt": ["x"], "max_tokens": 5}) == {
        "prompt": "x",
        "max_tokens": 5,
        "stream": False,
    }


@pytest.mark.parametrize(
    ("path", "raw", "words"),
    [
        (CHAT, b"{not json", "not valid JSON"),
        (CHAT, b'{"messages": []}', "at least one"),
        (CHAT, b'{"messages": [{"role": "user", "content": "\\ud800"}]}', "surrogate"),
        (CHAT, b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}', "temperature"),
        (CHAT, b'{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}', "messages.0.content"),
        (CHAT, b'{"messages": [{"role": "user", "content": "x"}], "tools": [{}]}', "tools"),
    ],
)
def test_malformed_bodies(path, raw, words):
    with pytest.raises(InvalidRequest, match=words):
        admit(path, raw, CAPS)


def test_the_caps_name_their_flags():
    with pytest.raises(OverCap, match="--max-messages"):
        _admit(CHAT, {"messages": [{"role": "user", "content": "x"}] * 5})
    with pytest.raises(OverCap, match=r"104 characters.*at most 100.*--max-prompt-chars"):
        _admit(CHAT, {"messages": [{"role": "user", "content": "x" * 100}]})
    with pytest.raises(OverCap, match="--max-prompt-chars"):
        _admit("/v1/completions", {"prompt": "x" * 101})
    assert OverCap.code == "request_too_large"


def test_the_character_cap_follows_the_context():
    assert derived_max_chars(512) == 32 * 512 and derived_max_chars(4096) > derived_max_chars(2048)


def test_worker_errors_are_passed_on_in_one_shape():
    from edgepilot.serve.wire import worker_error

    native = b'{"error":{"code":400,"message":"too long","type":"exceed_context_size_error","n_ctx":256}}'
    assert json.loads(worker_error(400, native)) == {
        "error": {
            "message": "too long",
            "type": "invalid_request_error",
            "param": None,
            "code": "context_length_exceeded",
        }
    }
    own = b'{"error":{"message":"m","type":"invalid_request_error","param":null,"code":"empty_prompt"}}'
    assert json.loads(worker_error(400, own))["error"]["code"] == "empty_prompt"
    assert json.loads(worker_error(500, b"plain text crash"))["error"] == {
        "message": "plain text crash",
        "type": "server_error",
        "param": None,
        "code": None,
    }
