"""What the front checks of a request before its meaning: that the Host header names this machine (DNS
rebinding, on loopback), and that the body arrives whole within its size limit."""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from typing import Any

Receive = Callable[[], Awaitable[dict[str, Any]]]

LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


class TooLarge(Exception):
    pass


class ClientGone(Exception):
    pass


def _host_name(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def loopback_host_header(value: str, bound: str) -> bool:
    name = _host_name(value)
    if name in LOOPBACK_NAMES or name == bound.strip("[]").lower():
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


async def read_body(headers: dict[bytes, bytes], receive: Receive, limit: int) -> bytes:
    """The whole body; TooLarge past `limit` bytes (declared or received), ClientGone if the client left."""
    declared = headers.get(b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge
    chunks, total = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > limit:
            raise TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
