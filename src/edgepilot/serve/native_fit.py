"""A chat longer than llama-server's context, fitted by the front as edgepilot's own worker fits it.

llama-server answers a conversation longer than its slot's context with a 400. Before relaying, the front
counts the conversation's tokens with llama-server itself (`/apply-template`, the template its chat endpoint
renders with, then `/tokenize`), drops the oldest turns after the system message exactly as the in-process
worker does (serve/prompt_fit.py), and asks the slot to keep what it already holds of the turns kept
(`n_cache_reuse`: their cells move down the cache, engine/kv_slide.py, instead of a whole new prefill).
A request whose characters alone prove it fits is relayed as it came (no token counting).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from edgepilot.engine.conversation import ConversationTooLong, answer_room
from edgepilot.engine.kv_slide import MIN_CHUNK
from edgepilot.engine.unix_http import UnixClient, WorkerUnavailable
from edgepilot.serve.prompt_fit import fit_within, message_overhead
from edgepilot.serve.short_lane import short_enough

TIMEOUT_S = 30.0  # templating and tokenizing a conversation within the server's character cap


class TokenCountFailed(Exception):
    """llama-server did not count the tokens (stopped, restarting, an answer that is not one)."""


class WorkerTokens:
    """What fit_within needs of an engine, asked of the llama-server worker over its socket."""

    def __init__(self, socket_path: str) -> None:
        self.client = UnixClient(socket_path, timeout=TIMEOUT_S)

    def _json(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            status, data = self.client.request("POST", path, body)
            out = json.loads(data) if status == 200 else None
        except (WorkerUnavailable, ValueError) as exc:
            raise TokenCountFailed(f"{path}: {exc}") from None
        if not isinstance(out, dict):
            raise TokenCountFailed(f"{path} answered HTTP {status}")
        return out

    def chat_messages_prompt(self, messages: list[tuple[str, str]]) -> str | None:
        body = {"messages": [{"role": r, "content": c} for r, c in messages]}
        prompt = self._json("/apply-template", body).get("prompt")
        if not isinstance(prompt, str):
            raise TokenCountFailed("/apply-template gave no prompt")
        return prompt

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        body = {"content": text, "add_special": add_special, "parse_special": parse_special}
        tokens = self._json("/tokenize", body).get("tokens")
        if not isinstance(tokens, list):
            raise TokenCountFailed("/tokenize gave no tokens")
        return tokens


@dataclass
class Fitted:
    body: bytes  # what llama-server gets
    notes: list[str] = field(default_factory=list)  # said in the reply (a conversation trimmed)


def fit_chat(socket_path: str, body: bytes, chars: int, n_messages: int, n_ctx: int) -> Fitted:
    """The admitted chat body within llama-server's context (blocking: run it off the event loop).
    ConversationTooLong when even the newest message leaves no room; TokenCountFailed when llama-server did
    not count (the body is then relayed as it came, and llama-server says what it says)."""
    request = json.loads(body)
    max_tokens = int(request["max_tokens"])
    if short_enough(chars, n_messages, max_tokens, n_ctx):
        return Fitted(body)
    engine = WorkerTokens(socket_path)
    messages = [(m["role"], m["content"]) for m in request["messages"]]
    room = answer_room(max_tokens, n_ctx)
    r = fit_within(engine, messages, n_ctx, room, message_overhead(engine))  # type: ignore[arg-type]
    if not r.dropped:
        return Fitted(body)
    request["messages"] = [{"role": role, "content": content} for role, content in r.messages]
    request["n_cache_reuse"] = MIN_CHUNK  # the kept turns' cells slide down instead of being computed again
    return Fitted(json.dumps(request).encode(), r.notes)


__all__ = ["ConversationTooLong", "Fitted", "TokenCountFailed", "fit_chat"]
