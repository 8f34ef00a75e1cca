"""A small blocking HTTP/1.1 client for a child's private Unix socket (the standard library's http.client).

The tools engine talks to llama-server over it: JSON requests, and server-sent events for streamed answers.
Every failure to reach or read the server becomes WorkerUnavailable.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

MAX_BODY = 64 << 20  # a JSON answer (props, a tokenization) is far smaller
MAX_EVENT_LINE = 16 << 20


class WorkerUnavailable(Exception):
    """The server's socket refused, reset or closed the connection."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class UnixClient:
    def __init__(self, path: str, timeout: float | None = None) -> None:
        self.path, self.timeout = path, timeout

    def _send(self, method: str, target: str, body: dict[str, Any] | None) -> tuple[Any, Any]:
        conn = _UnixConnection(self.path, self.timeout)
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"} if data is not None else {}
        try:
            conn.request(method, target, body=data, headers=headers)
            return conn, conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise WorkerUnavailable(str(exc) or type(exc).__name__) from None

    def request(self, method: str, target: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
        conn, response = self._send(method, target, body)
        try:
            data = response.read(MAX_BODY + 1)
        except (OSError, http.client.HTTPException) as exc:
            raise WorkerUnavailable(str(exc) or type(exc).__name__) from None
        finally:
            conn.close()
        if len(data) > MAX_BODY:
            raise WorkerUnavailable(f"{target}'s answer is larger than {MAX_BODY >> 20} MiB")
        return response.status, data

    def get(self, target: str) -> tuple[int, bytes]:
        return self.request("GET", target)

    @contextlib.contextmanager
    def stream(self, method: str, target: str, body: dict[str, Any]) -> Iterator[Iterator[dict[str, Any]]]:
        """The events of a server-sent-events answer, as JSON objects; leaving the block closes the
        connection (the server stops generating for a client that went away)."""
        conn, response = self._send(method, target, body)
        try:
            if response.status != 200:
                text = response.read(4096).decode("utf-8", errors="replace")
                raise WorkerUnavailable(f"HTTP {response.status}: {_error_message(text)}")
            yield _events(response)
        finally:
            conn.close()


def _error_message(text: str) -> str:
    try:
        error = json.loads(text).get("error")
        return str(error.get("message") if isinstance(error, dict) else error)[:300]
    except (ValueError, AttributeError):
        return text[:300]


def _events(response: http.client.HTTPResponse) -> Iterator[dict[str, Any]]:
    while True:
        try:
            line = response.readline(MAX_EVENT_LINE)
        except (OSError, http.client.HTTPException) as exc:
            raise WorkerUnavailable(str(exc) or type(exc).__name__) from None
        if not line:
            return
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            return
        try:
            event = json.loads(payload)
        except ValueError:
            continue
        if isinstance(event, dict):
            if "error" in event and "content" not in event:
                raise WorkerUnavailable(_error_message(payload.decode("utf-8", errors="replace")))
            yield event
