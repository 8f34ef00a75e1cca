"""The messages a saved chat holds, read from its session header as untrusted input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROLES = ("system", "user", "assistant")  # what a chat's messages hold


def saved_messages(header: dict[str, Any], path: str | Path, n_ctx: int) -> list[tuple[str, str]]:
    """The chat's messages from a session header: a list of [role, text], at most one per context token
    (each took at least one when it was saved), roles the chat writes, texts within the header's own bound."""
    from edgepilot.engine.session_header import HeaderFields
    from edgepilot.engine.session_state import MAX_HEADER_BYTES

    fields = HeaderFields(path)
    if "messages" not in header:
        raise fields.missing("messages")
    out = []
    for i, item in enumerate(fields.items("messages", header["messages"], n_ctx)):
        if type(item) is not list or len(item) != 2:
            raise fields.refuse(f"messages[{i}]", item, "a [role, text] pair")
        role = fields.text(f"messages[{i}] role", item[0], 16)
        if role not in ROLES:
            raise fields.refuse(f"messages[{i}] role", role, f"one of {', '.join(ROLES)}")
        out.append((role, fields.text(f"messages[{i}] text", item[1], MAX_HEADER_BYTES)))
    return out
