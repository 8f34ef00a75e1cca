"""The front's HTTP/1.1 client to the worker's Unix socket (h11, which uvicorn already brings).

One connection per request: on a Unix socket that costs microseconds, and a worker that dies takes only its
own connections with it. Any break (EOF, reset, refused) becomes WorkerGone, which the front turns into a
503 or an error event: a client is never left waiting on a dead process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import h11

READ_SIZE = 65536


class WorkerGone(Exception):
    """The worker's connection failed or ended early: it is restarting, or died."""


class Upstream:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.conn = h11.Connection(h11.CLIENT)
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []

    async def _event(self, timeout: float | None) -> Any:
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as exc:  # e.g. the peer closed mid-body
                raise WorkerGone(f"the worker broke off its response ({exc})") from None
            if event is not h11.NEED_DATA:
                return event
            try:
                data = await asyncio.wait_for(self.reader.read(READ_SIZE), timeout)
            except (ConnectionError, OSError) as exc:
                raise WorkerGone(str(exc) or type(exc).__name__) from None
            self.conn.receive_data(data)  # b"" tells h11 the connection ended

    async def start(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes, timeout: float | None
    ) -> None:
        """Send the request and read the response head (waits while a non-streamed reply is generated)."""
        all_headers = [("host", "worker"), ("content-length", str(len(body))), *headers]
        try:
            self.writer.write(self.conn.send(h11.Request(method=method, target=target, headers=all_headers)))
            if body:
                self.writer.write(self.conn.send(h11.Data(data=body)))
            self.writer.write(self.conn.send(h11.EndOfMessage()))
            await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            raise WorkerGone(str(exc) or type(exc).__name__) from None
        event = await self._event(timeout)
        while isinstance(event, h11.InformationalResponse):
            event = await self._event(timeout)
        if not isinstance(event, h11.Response):
            raise WorkerGone("the worker answered without a status line")
        self.status = event.status_code
        self.headers = list(event.headers)

    async def body(self, timeout: float | None) -> AsyncIterator[bytes]:
        while True:
            event = await self._event(timeout)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return
            else:
                raise WorkerGone("the worker closed the connection mid-response")

    async def read_all(self, timeout: float | None) -> bytes:
        return b"".join([chunk async for chunk in self.body(timeout)])

    def header(self, name: bytes) -> bytes | None:
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def abort(self) -> None:
        """Drop the connection now (the client went away): the worker sees it and stops generating."""
        with contextlib.suppress(Exception):
            transport = self.writer.transport
            transport.abort()

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


async def connect(path: str, timeout: float = 5.0) -> Upstream:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(path), timeout)
    except (ConnectionError, FileNotFoundError, OSError, asyncio.TimeoutError) as exc:
        raise WorkerGone(f"cannot reach the worker: {exc or type(exc).__name__}") from None
    return Upstream(reader, writer)


async def get_json(path: str, target: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """A small GET to the worker (its /health); None when it does not answer."""
    try:
        up = await connect(path, timeout)
    except WorkerGone:
        return None
    try:
        await up.start("GET", target, [], b"", timeout)
        data = await up.read_all(timeout)
        return json.loads(data) if up.status == 200 else None
    except (WorkerGone, asyncio.TimeoutError, ValueError):
        return None
    finally:
        await up.close()


def probe_health(path: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """The same from a plain thread (the watchdog), without an event loop."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: worker\r\nConnection: close\r\n\r\n")
            chunks = []
            while True:
                chunk = s.recv(READ_SIZE)
                if not chunk:
                    break
                chunks.append(chunk)
    except OSError:
        return None
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None
