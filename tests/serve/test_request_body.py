"""The OpenAI request bodies, parsed without pydantic: what is accepted, what is refused and how the refusal
names the field (the served tests send the same bodies over HTTP)."""

from __future__ import annotations

import json

import pytest

from edgepilot.serve.request_body import (
    MAX_ROLE_CHARS,
    ChatRequest,
    CompletionRequest,
    InvalidRequest,
    OverCap,
    decode_json,
)

CHAT = [{"role": "user", "content": "x"}]


def test_a_full_chat_request():
    req = ChatRequest.parse(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "be brief", "name": "ignored"},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {"role": "assistant", "content": None},
            ],
            "max_tokens": 99,
            "max_completion_tokens": 7.0,  # an integral float is an integer
            "temperature": 0,
            "top_p": 0.5,
            "top_k": 40,
            "min_p": 0.1,
            "seed": -1,
            "stop": "\n",
            "stream": True,
            "stream_options": {"include_usage": True},
            "n": 1,
            "user": "u-1",  # harmless extras are ignored
            "presence_penalty": 0.5,
            "tool_choice": "auto",
            "response_format": {"type": "text"},
            "logprobs": False,
        }
    )
    assert [m.text() for m in req.messages] == ["be brief", "ab", ""]
    assert req.wanted_tokens() == 7 and req.max_tokens == 99
    assert (req.temperature, req.top_p, req.top_k, req.min_p, req.seed) == (0.0, 0.5, 40, 0.1, -1)
    assert req.stop == ["\n"] and req.stream and req.include_usage and req.model == "m"


def test_defaults_are_unset():
    req = CompletionRequest.parse({"prompt": ["only one"]})
    assert req.prompt == "only one" and req.wanted_tokens() is None
    assert (req.temperature, req.top_p, req.top_k, req.min_p, req.seed) == (None,) * 5
    assert req.stop == [] and not req.stream and not req.include_usage


@pytest.mark.parametrize(
    ("body", "where", "words"),
    [
        ({"messages": CHAT, "n": 2}, "n", "n > 1"),
        ({"messages": CHAT, "n": 0}, "n", "at least 1"),
        ({"messages": []}, "messages", "at least one"),
        ({}, "messages", "required"),
        ({"messages": "hi"}, "messages", "list"),
        ({"messages": ["hi"]}, "messages.0", "object"),
        ({"messages": [{"content": "x"}]}, "messages.0.role", "required"),
        ({"messages": [{"role": "", "content": "x"}]}, "messages.0.role", "1 to"),
        ({"messages": [{"role": "r" * (MAX_ROLE_CHARS + 1)}]}, "messages.0.role", "1 to"),
        ({"messages": [{"role": "u", "content": 5}]}, "messages.0.content", "string or a list"),
        ({"messages": [{"role": "u", "content": [{"text": "a"}]}]}, "messages.0.content.0.type", "required"),
        ({"messages": [{"role": "u", "content": [{"type": "text", "text": 1}]}]}, "content.0.text", "string"),
        ({"messages": [{"role": "u", "content": "\ud800"}]}, "messages.0.content", "surrogate"),
        ({"messages": [{"role": "u\udfff"}]}, "messages.0.role", "surrogate"),
        ({"messages": CHAT, "max_tokens": -1}, "max_tokens", "at least 0"),
        ({"messages": CHAT, "max_tokens": 1.5}, "max_tokens", "integer"),
        ({"messages": CHAT, "max_tokens": True}, "max_tokens", "integer"),
        ({"messages": CHAT, "max_completion_tokens": "7"}, "max_completion_tokens", "integer"),
        ({"messages": CHAT, "temperature": "hot"}, "temperature", "number"),
        ({"messages": CHAT, "temperature": 2.5}, "temperature", "at most 2"),
        ({"messages": CHAT, "temperature": float("nan")}, "temperature", "at most 2"),
        ({"messages": CHAT, "top_p": 0}, "top_p", "above 0"),
        ({"messages": CHAT, "top_k": 2**40}, "top_k", "at most"),
        ({"messages": CHAT, "min_p": -0.1}, "min_p", "at least 0"),
        ({"messages": CHAT, "seed": "1"}, "seed", "integer"),
        ({"messages": CHAT, "stream": "yes please"}, "stream", "true or false"),
        ({"messages": CHAT, "stream": 1}, "stream", "true or false"),
        ({"messages": CHAT, "stream_options": "x"}, "stream_options", "object"),
        ({"messages": CHAT, "stream_options": {"include_usage": "y"}}, "include_usage", "true or false"),
        ({"messages": CHAT, "model": 5}, "model", "string"),
        ({"messages": CHAT, "stop": ["a", "b", "c", "d", "e"]}, "stop", "at most 4"),
        ({"messages": CHAT, "stop": ["x" * 257]}, "stop", "256 characters"),
        ({"messages": CHAT, "stop": [1]}, "stop", "list of strings"),
    ],
)
def test_chat_refusals_name_the_field(body, where, words):
    with pytest.raises(InvalidRequest) as refused:
        ChatRequest.parse(body)
    message = str(refused.value)
    assert where in message.split(":")[0] and words in message, message


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"prompt": ["a", "b"]}, "one prompt"),
        ({"prompt": []}, "one prompt"),
        ({"prompt": 5}, "string or a list"),
        ({"prompt": None}, "required"),
        ({"prompt": "\ud800"}, "surrogate"),
        ({"prompt": "ok", "stop": ["\udfff"]}, "surrogate"),
        ([], "object"),
        ("a prompt", "object"),
        (None, "object"),
    ],
)
def test_completion_refusals(body, words):
    with pytest.raises(InvalidRequest, match=words):
        CompletionRequest.parse(body)


def test_non_text_content_is_refused_when_read():
    req = ChatRequest.parse({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})
    with pytest.raises(ValueError, match="only text"):
        req.messages[0].text()


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"", "empty"),
        (b"  \n", "empty"),
        (b"{not json", "not valid JSON"),
        (b'{"prompt": "\xff\xfe"}', "not valid JSON"),
        (b'{"prompt": ' + b"[" * 30000 + b"]" * 30000 + b"}", "nested too deeply"),
        (b'{"max_tokens": 1' + b"0" * 5000 + b"}", "not valid JSON"),  # past Python's int digit limit
    ],
)
def test_bodies_that_are_not_json(raw, words):
    with pytest.raises(InvalidRequest, match=words) as refused:
        decode_json(raw)
    assert str(refused.value).startswith("the request body: ")


def test_json_round_trip_of_a_lone_surrogate():
    body = decode_json(json.dumps({"prompt": "\ud800"}).encode())
    with pytest.raises(InvalidRequest, match=r"prompt: .*\\ud800"):
        CompletionRequest.parse(body)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"n": 3}, "n"),
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}}, "response_format"),
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"logit_bias": {"50256": -100}}, "logit_bias"),
        ({"grammar": 'root ::= "a"'}, "grammar"),
        ({"json_schema": {"type": "object"}}, "json_schema"),
    ],
)
def test_fields_that_would_change_the_answer_are_refused_by_name(extra, field):
    for parse, base in ((ChatRequest.parse, {"messages": CHAT}), (CompletionRequest.parse, {"prompt": "x"})):
        with pytest.raises(InvalidRequest) as refused:
            parse({**base, **extra})
        assert str(refused.value).split(":")[0] == field, refused.value


def test_the_message_cap_is_checked_before_the_messages_are_read():
    many = [5] * 2001  # not even messages: the count alone refuses them
    with pytest.raises(OverCap, match=r"2001 messages.*at most 256 .*--max-messages"):
        ChatRequest.parse({"messages": many}, max_messages=256)
    assert len(ChatRequest.parse({"messages": CHAT * 256}, max_messages=256).messages) == 256
