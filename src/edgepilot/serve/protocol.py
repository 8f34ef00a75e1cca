"""The OpenAI wire format the worker speaks: request models (validated by pydantic) and response shapes.

Only what edgepilot honours is declared; other fields clients commonly send (tools, logprobs, penalties...)
are accepted and ignored, except `n` > 1, which is refused rather than silently answered once.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from edgepilot.serve.stops import MAX_STOP_CHARS, MAX_STOPS


def valid_unicode(texts: str | list[str] | None) -> None:
    """JSON may carry a lone UTF-16 surrogate ("\\ud800"): no tokenizer can take one, so refuse it (400)."""
    for text in [texts] if isinstance(texts, str) else texts or []:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            lone = ord(text[exc.start])
            raise ValueError(
                f"the text holds a lone UTF-16 surrogate (\\u{lone:04x}); send valid Unicode"
            ) from None


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: str
    text: str | None = None


class Message(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: str = Field(min_length=1, max_length=64)
    content: str | list[ContentPart] | None = None

    @field_validator("role", mode="before")  # before: pydantic's own length check fails on it, less clearly
    @classmethod
    def _unicode_role(cls, role: object) -> object:
        if isinstance(role, str):
            valid_unicode(role)
        return role

    @field_validator("content")  # here, not on ContentPart: an error inside a union reads badly
    @classmethod
    def _unicode(cls, content: str | list[ContentPart] | None) -> str | list[ContentPart] | None:
        if isinstance(content, list):
            valid_unicode([part.text for part in content if part.text is not None])
        else:
            valid_unicode(content)
        return content

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        parts = []
        for part in self.content:
            if part.type != "text" or part.text is None:
                raise ValueError(f"only text content is supported, not '{part.type}'")
            parts.append(part.text)
        return "".join(parts)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: bool = False


class _Sampling(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    max_tokens: int | None = Field(None, ge=0)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=0)
    min_p: float | None = Field(None, ge=0, le=1)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1)

    @field_validator("n")
    @classmethod
    def _one_choice(cls, n: int) -> int:
        if n != 1:
            raise ValueError("n > 1 is not supported: one generation at a time on this device")
        return n

    @field_validator("stop")
    @classmethod
    def _stops(cls, stop: str | list[str] | None) -> str | list[str] | None:
        items = [stop] if isinstance(stop, str) else stop or []
        if len(items) > MAX_STOPS:
            raise ValueError(f"at most {MAX_STOPS} stop strings")
        if any(len(s) > MAX_STOP_CHARS for s in items):
            raise ValueError(f"stop strings are limited to {MAX_STOP_CHARS} characters")
        valid_unicode(items)
        return stop

    def stop_list(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])

    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatRequest(_Sampling):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=0)

    def wanted_tokens(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


class CompletionRequest(_Sampling):
    prompt: str | list[str]

    @field_validator("prompt")
    @classmethod
    def _one_prompt(cls, prompt: str | list[str]) -> str | list[str]:
        if isinstance(prompt, list) and len(prompt) != 1:
            raise ValueError("give one prompt (a list of several prompts is not supported)")
        valid_unicode(prompt)
        return prompt

    def prompt_text(self) -> str:
        return self.prompt if isinstance(self.prompt, str) else self.prompt[0]

    def wanted_tokens(self) -> int | None:
        return self.max_tokens


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


def finish_reason(stopped_by: str, hit_stop: bool) -> str:
    return "stop" if hit_stop or stopped_by == "eog" else "length"


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(12)}"


def usage(o: Outcome) -> dict[str, int]:
    return {"prompt_tokens": o.n_prompt, "completion_tokens": o.n_gen, "total_tokens": o.n_prompt + o.n_gen}


def timings(o: Outcome) -> dict[str, float]:
    """llama-server's extension: how fast this request ran."""
    return {"prompt_per_second": round(o.prompt_tps, 2), "predicted_per_second": round(o.gen_tps, 2)}


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
