"""The JSON header of a session file, checked field by field before anything is loaded from it.

A session file is untrusted input: JSON gives `null` where a number belongs, `true` where a count belongs
(Python's True == 1), 256.0 for 256. Each field the loader relies on must have its exact type and a value in
range; the first that does not is named in one line, and nothing of the file is used.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from edgepilot.errors import UserError
from edgepilot.gguf.ggml_types import KV_CACHE_TYPES
from edgepilot.plan.settings import MAX_TOKENS_SETTING

MAX_MODEL_BYTES = 1 << 44  # 16 TiB: no GGUF file comes near it
MAX_GPU_LAYERS = 1 << 16  # no model has near 65,536 layers
MODEL_KEYS = ("size", "head_sha256")
CONTEXT_KEYS = ("n_ctx", "type_k", "type_v", "flash_attn", "swa_full", "n_gpu_layers")


class SessionFileError(UserError):
    """A session file that cannot be loaded into this session."""


class CacheNotLoaded(SessionFileError):
    """A sound session file whose cache this session cannot take (other settings; llama-server refused its
    slot): its messages can still be taken alone."""


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:39] + "…"


class HeaderFields:
    """Typed reads of a session header's fields: each returns the value or raises one SessionFileError line
    naming the field (`context.n_ctx`, `messages[3]`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = path

    def refuse(self, name: str, value: Any, want: str) -> SessionFileError:
        return SessionFileError(
            f"{self.path} is damaged: its header's {name} is {_shown(value)}, not {want}; nothing was loaded"
        )

    def missing(self, name: str) -> SessionFileError:
        return SessionFileError(f"{self.path} is damaged: its header has no {name}; nothing was loaded")

    def whole(self, name: str, value: Any, low: int, high: int) -> int:
        if type(value) is not int or not low <= value <= high:
            raise self.refuse(name, value, f"a whole number from {low} to {high}")
        return value

    def flag(self, name: str, value: Any) -> bool:
        if type(value) is not bool:
            raise self.refuse(name, value, "true or false")
        return value

    def text(self, name: str, value: Any, longest: int) -> str:
        if type(value) is not str or len(value) > longest:
            raise self.refuse(name, value, f"text of at most {longest} characters")
        return value

    def matching(self, name: str, value: Any, pattern: str, want: str) -> str:
        if type(value) is not str or not re.fullmatch(pattern, value):
            raise self.refuse(name, value, want)
        return value

    def record(self, name: str, value: Any, keys: tuple[str, ...]) -> dict[str, Any]:
        """An object with exactly `keys`."""
        if type(value) is not dict:
            raise self.refuse(name, value, f"an object of {', '.join(keys)}")
        for key in keys:
            if key not in value:
                raise self.missing(f"{name}.{key}")
        extra = next((k for k in value if k not in keys), None)
        if extra is not None:
            raise SessionFileError(
                f"{self.path} is damaged: its header's {name} has an unknown field "
                f"{_shown(extra)}; nothing was loaded"
            )
        return value

    def items(self, name: str, value: Any, most: int) -> list[Any]:
        if type(value) is not list:
            raise self.refuse(name, value, f"a list of at most {most}")
        if len(value) > most:
            raise SessionFileError(
                f"{self.path} is damaged: its header's {name} has {len(value)} items, more than "
                f"{most}; nothing was loaded"
            )
        return value


def check_header(
    header: dict[str, Any],
    path: str | Path,
    *,
    identity: dict[str, Any],
    n_ctx: int,
    n_vocab: int,
    max_state_bytes: int,
) -> None:
    """Every field load_session uses, typed and in range (SessionFileError naming the first that is not).
    The model comes first: a file saved with another model (`identity` is this one's) is told as such."""
    f = HeaderFields(path)
    for key in ("model", "context", "tokens", "state_bytes"):
        if key not in header:
            raise f.missing(key)
    model = f.record("model", header["model"], MODEL_KEYS)
    f.whole("model.size", model["size"], 1, MAX_MODEL_BYTES)
    f.matching("model.head_sha256", model["head_sha256"], r"[0-9a-f]{64}", "a sha256 (64 hex digits)")
    if model != identity:
        raise SessionFileError(f"{path} was saved with another model file; load it with that model")
    context = f.record("context", header["context"], CONTEXT_KEYS)
    f.whole("context.n_ctx", context["n_ctx"], 16, MAX_TOKENS_SETTING)
    for key in ("type_k", "type_v"):
        kind = f.text(f"context.{key}", context[key], 16)
        if kind.lower() not in KV_CACHE_TYPES:
            raise f.refuse(f"context.{key}", kind, f"a KV cache type ({', '.join(KV_CACHE_TYPES)})")
    f.flag("context.flash_attn", context["flash_attn"])
    f.flag("context.swa_full", context["swa_full"])
    f.whole("context.n_gpu_layers", context["n_gpu_layers"], 0, MAX_GPU_LAYERS)
    tokens = f.items("tokens", header["tokens"], n_ctx - 1)
    for i, token in enumerate(tokens):
        f.whole(f"tokens[{i}]", token, 0, n_vocab - 1)
    f.whole("state_bytes", header["state_bytes"], 0, max_state_bytes)
