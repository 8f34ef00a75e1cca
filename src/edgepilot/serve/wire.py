"""Small pieces of the OpenAI wire format both processes write (kept free of pydantic for the front)."""

from __future__ import annotations

import json
from typing import Any


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def sse(obj: Any) -> bytes:
    """One server-sent event carrying a JSON object, as OpenAI streams them."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
