"""Small pieces of the OpenAI wire format both processes write (kept free of pydantic for the front)."""

from __future__ import annotations

import json
from typing import Any


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def sse(obj: Any) -> bytes:
    """One server-sent event carrying a JSON object, as OpenAI streams them."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


# llama-server's own error types, as OpenAI's codes (the in-process worker's errors are already in this shape)
NATIVE_CODES = {"exceed_context_size_error": "context_length_exceeded"}


def worker_error(status: int, payload: bytes) -> bytes:
    """A worker's error reply in the one shape both engines answer with: OpenAI's {"error": {message, type,
    param, code}}. llama-server's differs (an integer code, its own types and extra keys)."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    try:
        error = json.loads(payload)["error"]
        message = error["message"]
    except (ValueError, KeyError, TypeError):
        text = payload.decode("utf-8", errors="replace").strip()[:500]
        return json.dumps(error_body(text or f"the model server answered {status}", kind)).encode()
    native = error.get("type")
    code = error.get("code")
    code = NATIVE_CODES.get(native) if isinstance(native, str) and native in NATIVE_CODES else code
    return json.dumps(error_body(str(message), kind, code if isinstance(code, str) else None)).encode()


NOTE_HEADER = b"x-edgepilot-note"


def note_header(worker_note: bytes | None, notes: list[str]) -> list[tuple[bytes, bytes]]:
    """The X-Edgepilot-Note header: the worker's own note (a trimmed conversation) and the front's."""
    parts = ([worker_note.decode("latin-1")] if worker_note else []) + notes
    text = "; ".join(parts).encode("ascii", errors="replace")
    return [(NOTE_HEADER, text)] if text else []


def with_notes(payload: bytes, notes: list[str]) -> bytes:
    """A JSON reply with the front's notes added to its `notes` list (an additive key both engines carry)."""
    if not notes:
        return payload
    try:
        body = json.loads(payload)
    except ValueError:
        return payload
    if not isinstance(body, dict):
        return payload
    earlier = body.get("notes")
    body["notes"] = [*(earlier if isinstance(earlier, list) else []), *notes]
    return json.dumps(body).encode()
