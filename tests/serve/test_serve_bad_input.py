"""What clients get wrong, sent to a real `edgepilot serve`: each bad request is one OpenAI-style JSON error
(400), never a plain-text 500; an empty completion prompt is answered from the start of a document, as
llama-server does."""

from __future__ import annotations

import json

import pytest

CHAT = [{"role": "user", "content": "Hi."}]


def _error(reply: tuple[int, dict[str, str], bytes], status: int = 400) -> dict:
    code, headers, body = reply
    assert code == status, body
    assert headers["content-type"].startswith("application/json"), body
    error = json.loads(body)["error"]
    assert error["message"] and error["type"] == "invalid_request_error"
    return error


@pytest.mark.parametrize("prompt", ["", [""]])
def test_an_empty_prompt_is_completed_from_the_start_of_a_document(served, prompt):
    reply = served.client().completions.create(model="any", prompt=prompt, max_tokens=8, temperature=0)
    assert reply.usage.prompt_tokens == 1  # the begin-of-text token alone
    assert reply.usage.completion_tokens >= 1 and reply.choices[0].text
    assert reply.choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize("prompt", ["", [""]])
def test_an_empty_prompt_streams(served, prompt):
    stream = served.client().completions.create(
        model="any", prompt=prompt, max_tokens=8, temperature=0, stream=True
    )
    chunks = list(stream)
    assert "".join(c.choices[0].text for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


LONE = "\ud800"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/completions", {"prompt": LONE}),
        ("/v1/completions", {"prompt": ["ok " + LONE]}),
        ("/v1/completions", {"prompt": LONE, "stream": True}),
        ("/v1/completions", {"prompt": "ok", "stop": ["\udfff"]}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": LONE}]}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": LONE}], "stream": True}),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": [{"type": "text", "text": LONE}]}]},
        ),
        ("/v1/chat/completions", {"messages": [{"role": "us" + LONE, "content": "hi"}]}),
    ],
)
def test_a_lone_surrogate_is_a_400(served, path, body):
    raw = json.dumps({**body, "max_tokens": 4}).encode()  # ensure_ascii: "\ud800" travels as valid JSON
    assert b"\\ud800" in raw or b"\\udfff" in raw
    headers = {**served.auth(), "Content-Type": "application/json"}
    error = _error(served.request("POST", path, raw, headers))
    assert "surrogate" in error["message"]


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        ("/v1/completions", b"[]"),
        ("/v1/completions", b'"a prompt"'),
        ("/v1/completions", b"null"),
        ("/v1/completions", b'{"prompt": 5}'),
        ("/v1/completions", b'{"prompt": "x", "max_tokens": -1}'),
        ("/v1/completions", b'{"prompt": "x", "temperature": "hot"}'),
        ("/v1/completions", b'{"prompt": "x", "stream": "yes please"}'),
        ("/v1/chat/completions", b'{"messages": "hi"}'),
        ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}'),
        ("/v1/completions", b'{"prompt": ' + b"[" * 30000 + b"]" * 30000 + b"}"),  # deeper than any parser
        ("/v1/completions", b'{"prompt": "\xff\xfe"}'),  # not UTF-8
        ("/v1/completions", b""),
    ],
)
def test_malformed_bodies_are_a_json_400(served, path, raw):
    headers = {**served.auth(), "Content-Type": "application/json"}
    _error(served.request("POST", path, raw, headers))


def test_an_empty_body_says_where_the_problem_is(served):
    headers = {**served.auth(), "Content-Type": "application/json"}
    error = _error(served.request("POST", "/v1/completions", b"", headers))
    assert error["message"].startswith("the request body: ")
