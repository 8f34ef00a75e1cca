"""The OpenAI wire format the worker writes: how a generation ended and the response shapes built from it
(the requests it reads are parsed in request_body)."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Outcome:
    """How one generation ended."""

    n_prompt: int
    n_gen: int
    finish_reason: str  # "stop" | "length"
    prompt_tps: float
    gen_tps: float
    seconds: float
    text: str = ""
    n_cached: int = 0  # prompt tokens reused from the KV cache (not processed again)
    ttft_ms: float = 0.0
    notes: list[str] = field(default_factory=list)  # e.g. old turns dropped to fit the context
    context_shift: dict[str, int] | None = None  # old turns dropped: cached tokens dropped, kept, recomputed


def finish_reason(stopped_by: str, hit_stop: bool) -> str:
    return "stop" if hit_stop or stopped_by == "eog" else "length"


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(12)}"


def usage(o: Outcome) -> dict[str, Any]:
    return {
        "prompt_tokens": o.n_prompt,
        "completion_tokens": o.n_gen,
        "total_tokens": o.n_prompt + o.n_gen,
        "prompt_tokens_details": {"cached_tokens": o.n_cached},
    }


def timings(o: Outcome) -> dict[str, float]:
    """llama-server's extension: how fast this request ran."""
    return {
        "prompt_per_second": round(o.prompt_tps, 2),
        "predicted_per_second": round(o.gen_tps, 2),
        "cache_n": o.n_cached,
        "prompt_n": o.n_prompt - o.n_cached,
        "ttft_ms": o.ttft_ms,
    }


def with_notes(body: dict[str, Any], o: Outcome) -> dict[str, Any]:
    """edgepilot's extension: what the server changed about the request (old turns dropped to fit)."""
    if o.notes:
        body["notes"] = list(o.notes)
    if o.context_shift is not None:
        body["context_shift"] = dict(o.context_shift)
    return body


def chat_response(rid: str, model: str, o: Outcome) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": o.text},
                "finish_reason": o.finish_reason,
                "logprobs": None,
            }
        ],
        "usage": usage(o),
        "timings": timings(o),
    }


def completion_response(rid: str, model: str, o: Outcome) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "text": o.text, "finish_reason": o.finish_reason, "logprobs": None}],
        "usage": usage(o),
        "timings": timings(o),
    }


def chat_chunk(rid: str, model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }


def completion_chunk(rid: str, model: str, text: str, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None}],
    }


def usage_chunk(rid: str, model: str, obj: str, o: Outcome) -> dict[str, Any]:
    return {
        "id": rid,
        "object": obj,
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": usage(o),
        "timings": timings(o),
    }
