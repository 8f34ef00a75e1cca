"""The OpenAI request bodies the worker accepts, parsed and checked by hand (no pydantic: it needs Rust to
build, which Termux's pip cannot do).

Only what edgepilot honours is read. A field that would change what the answer means if it were ignored
(`n` > 1, tools, a response format, logprobs, logit_bias, grammars...) is refused, naming it; others clients
commonly send (user, penalties, metadata...) are ignored (UNHONOURED below lists the refused ones). Types
are JSON's own: a number where a number is expected (an integral float such as 5.0 counts as an integer), a
boolean where a boolean is.
Every problem is one InvalidRequest naming the field, e.g. "messages.0.role: ...", which the worker answers
with a 400.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edgepilot.engine.stops import MAX_STOP_CHARS, MAX_STOPS

MAX_ROLE_CHARS = 64
MAX_TOP_K = 2**31 - 1  # llama_sampler_init_top_k takes an int32_t


class InvalidRequest(ValueError):
    """A request body that does not follow the OpenAI format as edgepilot serves it."""

    code: str | None = None


class OverCap(InvalidRequest):
    """A well-formed request over one of the server's per-request cost caps (messages, characters)."""

    code = "request_too_large"


def _fail(where: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"{where}: {message}")


def decode_json(raw: bytes) -> object:
    """The body as JSON; InvalidRequest for bytes that are not JSON (or nest deeper than Python parses)."""
    if not raw.strip():
        raise _fail("the request body", "empty; send a JSON object")
    try:
        return json.loads(raw)
    except RecursionError:
        raise _fail("the request body", "JSON nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an integer of too many digits
        raise _fail("the request body", f"not valid JSON ({exc})") from None


def _unicode(where: str, texts: str | list[str] | None) -> None:
    """JSON may carry a lone UTF-16 surrogate ("\\ud800"): no tokenizer can take one, so refuse it (400)."""
    for text in [texts] if isinstance(texts, str) else texts or []:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            lone = ord(text[exc.start])
            message = f"the text holds a lone UTF-16 surrogate (\\u{lone:04x}); send valid Unicode"
            raise _fail(where, message) from None


# -- one field each: None when absent or null ---------------------------------------------------------------
def _integer(body: dict[str, Any], key: str, low: int | None = 0, high: int | None = None) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(key, f"expected an integer, not {_kind(value)}")
    if low is not None and value < low:
        raise _fail(key, f"must be at least {low}")
    if high is not None and value > high:
        raise _fail(key, f"must be at most {high}")
    return value


def _number(body: dict[str, Any], key: str, low: float, high: float, low_open: bool = False) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(key, f"expected a number, not {_kind(value)}")
    value = float(value)
    above = value > low if low_open else value >= low
    if not (above and value <= high):  # NaN (which JSON.loads accepts) fails here too
        raise _fail(key, f"must be {'above' if low_open else 'at least'} {low:g} and at most {high:g}")
    return value


def _boolean(body: dict[str, Any], key: str) -> bool:
    value = body.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _fail(key, f"expected true or false, not {_kind(value)}")
    return value


def _string(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise _fail(key, f"expected a string, not {_kind(value)}")
    return value


def _strings(body: dict[str, Any], key: str) -> str | list[str] | None:
    """A string or a list of strings (OpenAI's `stop` and `prompt`)."""
    value = body.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise _fail(key, "expected a string or a list of strings")


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, f"expected a JSON object, not {_kind(value)}")
    return value


def _kind(value: object) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), "null")


# -- fields edgepilot does not honour -----------------------------------------------------------------------
def _set(value: object) -> bool:
    return value not in (None, False, 0, "", [], {})


UNHONOURED: dict[str, tuple[Callable[[object], bool], str]] = {
    # field: (when it is refused, why)
    "tools": (_set, "tool calls are not supported: the model answers in text only"),
    "tool_choice": (lambda v: v not in (None, "none", "auto"), "tool calls are not supported"),
    "functions": (_set, "function calls are not supported: the model answers in text only"),
    "function_call": (lambda v: v not in (None, "none", "auto"), "function calls are not supported"),
    "response_format": (
        lambda v: v is not None and v != {"type": "text"},
        'only {"type": "text"} is supported (no JSON mode, no schema)',
    ),
    "logprobs": (_set, "log probabilities are not supported"),
    "top_logprobs": (_set, "log probabilities are not supported"),
    "logit_bias": (_set, "logit_bias is not supported"),
    "echo": (_set, "echo is not supported"),
    "suffix": (_set, "suffix (fill in the middle) is not supported"),
    "best_of": (lambda v: v not in (None, 1), "best_of > 1 is not supported: one generation at a time"),
    "grammar": (_set, "grammars are not supported"),
    "json_schema": (_set, "JSON schemas are not supported"),
    "n_probs": (_set, "token probabilities are not supported"),
}


def refuse_unhonoured(body: dict[str, Any]) -> None:
    """InvalidRequest naming the first field whose meaning edgepilot would silently drop."""
    for key, (refused, why) in UNHONOURED.items():
        if key in body and refused(body[key]):
            raise _fail(key, why)


# -- the requests --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Message:
    role: str
    content: str | list[tuple[str, str | None]] | None  # a string, or (type, text) parts

    @classmethod
    def parse(cls, value: object, where: str) -> Message:
        body = _object(value, where)
        role = body.get("role")
        if not isinstance(role, str):
            raise _fail(f"{where}.role", "expected a string" if "role" in body else "required")
        _unicode(f"{where}.role", role)
        if not 1 <= len(role) <= MAX_ROLE_CHARS:
            raise _fail(f"{where}.role", f"must be 1 to {MAX_ROLE_CHARS} characters")
        content = body.get("content")
        if content is None or isinstance(content, str):
            _unicode(f"{where}.content", content)
            return cls(role, content)
        if not isinstance(content, list):
            raise _fail(f"{where}.content", "expected a string or a list of content parts")
        parts = []
        for i, part in enumerate(content):
            at = f"{where}.content.{i}"
            part = _object(part, at)
            kind, text = part.get("type"), part.get("text")
            if not isinstance(kind, str):
                raise _fail(f"{at}.type", "expected a string" if "type" in part else "required")
            if text is not None and not isinstance(text, str):
                raise _fail(f"{at}.text", f"expected a string, not {_kind(text)}")
            _unicode(f"{where}.content", text)
            parts.append((kind, text))
        return cls(role, parts)

    def text(self) -> str:
        """The message as one text; ValueError for content edgepilot cannot pass to a text model."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        texts = []
        for kind, text in self.content:
            if kind != "text" or text is None:
                raise ValueError(f"only text content is supported, not '{kind}'")
            texts.append(text)
        return "".join(texts)


@dataclass(frozen=True, kw_only=True)
class Sampling:
    """The fields both endpoints share."""

    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False

    @staticmethod
    def fields(body: dict[str, Any]) -> dict[str, Any]:
        n = _integer(body, "n", low=1)
        if n is not None and n != 1:
            raise _fail("n", "n > 1 is not supported: one generation at a time on this device")
        refuse_unhonoured(body)
        stop = _strings(body, "stop")
        stops = [stop] if isinstance(stop, str) else stop or []
        if len(stops) > MAX_STOPS:
            raise _fail("stop", f"at most {MAX_STOPS} stop strings")
        if any(len(s) > MAX_STOP_CHARS for s in stops):
            raise _fail("stop", f"stop strings are limited to {MAX_STOP_CHARS} characters")
        _unicode("stop", stops)
        options = body.get("stream_options")
        include_usage = _boolean(_object(options, "stream_options"), "include_usage") if options else False
        return {
            "model": _string(body, "model"),
            "max_tokens": _integer(body, "max_tokens"),
            "temperature": _number(body, "temperature", 0, 2),
            "top_p": _number(body, "top_p", 0, 1, low_open=True),
            "top_k": _integer(body, "top_k", high=MAX_TOP_K),
            "min_p": _number(body, "min_p", 0, 1),
            "seed": _integer(body, "seed", low=None),
            "stop": stops,
            "stream": _boolean(body, "stream"),
            "include_usage": include_usage,
        }


@dataclass(frozen=True, kw_only=True)
class ChatRequest(Sampling):
    messages: list[Message]
    max_completion_tokens: int | None = None

    @classmethod
    def parse(cls, body: object, max_messages: int | None = None) -> ChatRequest:
        body = _object(body, "the request body")
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise _fail("messages", "expected a list of messages" if "messages" in body else "required")
        if not messages:
            raise _fail("messages", "give at least one message")
        if max_messages is not None and len(messages) > max_messages:  # before reading any of them
            raise OverCap(
                f"messages: {len(messages)} messages; this server takes at most {max_messages} in one "
                "request (--max-messages)"
            )
        return cls(
            messages=[Message.parse(m, f"messages.{i}") for i, m in enumerate(messages)],
            max_completion_tokens=_integer(body, "max_completion_tokens"),
            **Sampling.fields(body),
        )

    def wanted_tokens(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


@dataclass(frozen=True, kw_only=True)
class CompletionRequest(Sampling):
    prompt: str

    @classmethod
    def parse(cls, body: object) -> CompletionRequest:
        body = _object(body, "the request body")
        prompt = _strings(body, "prompt")
        if prompt is None:
            raise _fail("prompt", "required")
        if isinstance(prompt, list):
            if len(prompt) != 1:
                raise _fail("prompt", "give one prompt (a list of several prompts is not supported)")
            prompt = prompt[0]
        _unicode("prompt", prompt)
        return cls(prompt=prompt, **Sampling.fields(body))

    def wanted_tokens(self) -> int | None:
        return self.max_tokens
