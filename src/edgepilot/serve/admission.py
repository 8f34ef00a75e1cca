"""What the front checks before a request may queue for the engine, the same in front of both workers.

The body is parsed and validated here (request_body, the parser the in-process worker uses too), held to the
per-request cost caps (messages, characters), and passed on rebuilt from what was read: only the fields
edgepilot honours, `max_tokens` clamped, plain text messages. So llama-server sees no body it could answer
with a 500, nor a field it would honour and the in-process worker would not, and a request too big to be
worth the engine's time is refused before it waits for it. The tokens are counted by the worker, message by
message from the newest (serve/prompt_fit.py), so the prompt processed is bounded by --max-prompt-tokens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from edgepilot.serve.request_body import (
    ChatRequest,
    CompletionRequest,
    InvalidRequest,
    OverCap,
    Sampling,
    decode_json,
)

CHAT_PATH = "/v1/chat/completions"
CHARS_PER_CONTEXT_TOKEN = 32  # the derived character cap: a history several contexts long (~4 per token)
DEFAULT_MAX_MESSAGES = 256


def derived_max_chars(n_ctx: int) -> int:
    """--max-prompt-chars when not given: ample for any history the context can hold a part of."""
    return CHARS_PER_CONTEXT_TOKEN * max(n_ctx, 256)


@dataclass(frozen=True)
class Caps:
    max_messages: int
    max_chars: int
    max_tokens: int  # the server's --max-tokens: a request's own is clamped to it


def cap_note(wanted: int | None, caps: Caps) -> list[str]:
    """What the response says when the request's own max_tokens was lowered to the server's cap."""
    if wanted is None or wanted <= caps.max_tokens:
        return []
    return [f"max_tokens capped at {caps.max_tokens} (asked {wanted}; the server's --max-tokens)"]


def _sampling(req: Sampling, wanted: int | None, caps: Caps) -> dict[str, Any]:
    out: dict[str, Any] = {
        "max_tokens": caps.max_tokens if wanted is None else min(wanted, caps.max_tokens),
        "stream": req.stream,
    }
    if req.model is not None:
        out["model"] = req.model
    for key in ("temperature", "top_p", "top_k", "min_p", "seed"):
        value = getattr(req, key)
        if value is not None:
            out[key] = value
    if req.stop:
        out["stop"] = list(req.stop)
    if req.stream and req.include_usage:
        out["stream_options"] = {"include_usage": True}
    return out


def _over(what: str, count: int, cap: int, flag: str) -> OverCap:
    return OverCap(f"the prompt has {count} {what}; this server takes at most {cap} in one request ({flag})")


@dataclass(frozen=True)
class Admitted:
    body: bytes  # what the worker gets
    notes: list[str]  # what the response says about what admission changed (a capped max_tokens)
    chars: int  # the prompt's characters (roles included)
    n_messages: int  # 0 for a completion
    max_tokens: int  # after the server's cap


def admit(path: str, raw: bytes, caps: Caps) -> bytes:
    """The body to pass to the worker; InvalidRequest (a 400, naming the field or the cap) otherwise."""
    return admit_request(path, raw, caps).body


def admit_request(path: str, raw: bytes, caps: Caps) -> Admitted:
    """admit, with the notes for the response and what the request costs."""
    body = decode_json(raw)
    out: dict[str, Any]
    if path == CHAT_PATH:
        chat = ChatRequest.parse(body, max_messages=caps.max_messages)
        messages = []
        for i, m in enumerate(chat.messages):
            try:
                messages.append({"role": m.role, "content": m.text()})
            except ValueError as exc:  # an image or audio part: not for a text model
                raise InvalidRequest(f"messages.{i}.content: {exc}") from None
        chars = sum(len(m["role"]) + len(m["content"]) for m in messages)
        if chars > caps.max_chars:
            raise _over("characters", chars, caps.max_chars, "--max-prompt-chars")
        out = {"messages": messages, **_sampling(chat, chat.wanted_tokens(), caps)}
        notes = cap_note(chat.wanted_tokens(), caps)
        n_messages = len(messages)
    else:
        completion = CompletionRequest.parse(body)
        if len(completion.prompt) > caps.max_chars:
            raise _over("characters", len(completion.prompt), caps.max_chars, "--max-prompt-chars")
        out = {"prompt": completion.prompt, **_sampling(completion, completion.wanted_tokens(), caps)}
        notes = cap_note(completion.wanted_tokens(), caps)
        chars, n_messages = len(completion.prompt), 0
    return Admitted(json.dumps(out).encode(), notes, chars, n_messages, out["max_tokens"])
