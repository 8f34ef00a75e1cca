"""Bounds on every connection to the front, below the app (a uvicorn HTTP protocol, h11 underneath).

uvicorn alone times out only a connection that sat idle after a reply: one that connects and sends nothing,
or trickles a byte at a time (slowloris), stays forever, and its `limit_concurrency` counts such connections
and then answers every request, keyed or not, with a plain-text 503. Here each connection is always in one
phase, and each phase is bounded:

    head   waiting for a request head (nothing sent yet, a partial head, or idle after a reply)
           -> whole head within header_timeout of entering the phase (a total, not reset by each byte)
    body   the app is reading the body       -> whole body within body_timeout of the head
    drain  the reply went out, body still coming (e.g. a 401 before the body) -> same body deadline
    app    request complete, the app answers -> the app's own bounds (queue, request_timeout); a client
           that reads nothing of its reply for send_timeout is dropped

Connections in `head` or `drain` have no request the server is working on: the front has not seen a key on
them yet, or has answered already. They are the only ones counted against max_idle_connections; past it,
the oldest idle connection of the client address holding the most is closed (a flood from one machine
evicts its own first). So idle connections can neither starve the clients with a request under way nor run
the process out of file descriptors. Every refusal is JSON in the OpenAI shape, and after one the connection
lingers (our side ended, the client's bytes dropped) for up to LINGER s, so a client still sending reads
the reply instead of a reset.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from edgepilot.serve.config import ServeConfig
from edgepilot.serve.wire import error_body

HEAD, BODY, DRAIN, APP, CLOSED = "head", "body", "drain", "app", "closed"
MAX_HEAD_BYTES = 16 * 1024  # h11 stops buffering an unfinished request head here (its default too)
LINGER = 2.0  # seconds a refused connection is read (and dropped) after its error reply, at most
IDLE_PHASES = (HEAD, DRAIN)


def raw_error(status: int, message: str, code: str, extra: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A complete HTTP/1.1 error reply that closes the connection, written below h11 (which will not send a
    response to a request it has not seen whole)."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = json.dumps(error_body(message, kind, code)).encode()
    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        "x-content-type-options: nosniff",
        *(f"{name}: {value}" for name, value in extra),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@dataclass
class ConnectionGuard:
    """The limits, and the idle connections (head or drain) by client address, oldest first."""

    header_timeout: float
    body_timeout: float
    send_timeout: float
    max_idle: int
    retry_after: int
    counts: Counter[str] = field(default_factory=Counter)  # idle (now), evicted, timed_out
    idle: dict[str, dict[GuardedH11Protocol, None]] = field(default_factory=dict)
    n_idle: int = 0
    lingering: int = 0

    @classmethod
    def of(cls, config: ServeConfig, counts: Counter[str]) -> ConnectionGuard:
        return cls(
            header_timeout=config.header_timeout,
            body_timeout=config.body_timeout,
            send_timeout=config.send_timeout,
            max_idle=config.max_idle_connections,
            retry_after=config.retry_after,
            counts=counts,
        )

    def became_idle(self, conn: GuardedH11Protocol) -> None:
        self.left_idle(conn)  # a connection idle again after a reply counts as the newest
        self.idle.setdefault(conn.peer, {})[conn] = None
        self.n_idle += 1
        while self.n_idle > self.max_idle:
            # The oldest of the address holding the most: a flood from one machine evicts its own.
            busiest = max(self.idle.values(), key=len)
            self.counts["evicted"] += 1
            next(iter(busiest)).evict()  # calls left_idle
        self.counts["idle"] = self.n_idle

    def left_idle(self, conn: GuardedH11Protocol) -> None:
        group = self.idle.get(conn.peer)
        if group is not None and conn in group:
            del group[conn]
            self.n_idle -= 1
            if not group:
                del self.idle[conn.peer]
        self.counts["idle"] = self.n_idle


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a phase per connection, a deadline per phase and the idle cap."""

    guard: ConnectionGuard  # set on the subclass guarded_protocol() makes

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.phase = CLOSED
        self.peer = ""
        self.lingering = False
        self._deadline: asyncio.TimerHandle | None = None
        self._stall: asyncio.TimerHandle | None = None

    # -- following the connection ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.peer = self.client[0] if self.client else ""
        self._follow()

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            return  # the reply is out; what the client still sends is dropped
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._enter(CLOSED)
        self._cancel_deadline()
        self._cancel_stall()
        if self.lingering:
            self.lingering = False
            self.guard.lingering -= 1
        super().connection_lost(exc)

    def _current_phase(self) -> str:
        if self.transport is None or self.transport.is_closing() or self.lingering:
            return CLOSED
        theirs = self.conn.their_state
        if theirs is h11.IDLE:
            return HEAD
        if theirs is h11.SEND_BODY:
            return DRAIN if self.cycle is not None and self.cycle.response_started else BODY
        return APP

    def _follow(self) -> None:
        self._enter(self._current_phase())

    def _enter(self, phase: str) -> None:
        before, self.phase = self.phase, phase
        if phase == before:
            return  # a deadline runs from entering the phase: bytes that trickle in do not move it
        if phase != DRAIN or before != BODY:  # drain keeps the body's deadline
            self._cancel_deadline()
            if phase == HEAD:
                self._deadline = self.loop.call_later(self.guard.header_timeout, self._head_timed_out)
            elif phase in (BODY, DRAIN):
                self._deadline = self.loop.call_later(self.guard.body_timeout, self._body_timed_out)
        if phase in IDLE_PHASES:
            self.guard.became_idle(self)
        else:
            self.guard.left_idle(self)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _close(self, reply: bytes | None = None) -> None:
        self._enter(CLOSED)
        if self.transport.is_closing() or self.lingering:
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # an app waiting for the body gets http.disconnect now
            cycle.message_event.set()
        if reply is None:
            self.transport.close()
            return
        self.transport.write(reply)
        if not self.transport.can_write_eof() or self.guard.lingering >= self.guard.max_idle:
            self.transport.close()
            return
        # Closing with the client's bytes unread would send a reset, which can destroy the reply before the
        # client reads it: end our side, drop what still comes, close when the client does or LINGER passes.
        self.transport.write_eof()
        self.lingering = True
        self.guard.lingering += 1
        self._deadline = self.loop.call_later(LINGER, self.transport.close)

    def _partial_head(self) -> bool:
        return self.phase == HEAD and bool(self.conn.trailing_data[0])

    # -- the bounds --------------------------------------------------------------------------------------
    def _head_timed_out(self) -> None:
        self._deadline = None
        if self.phase != HEAD:
            return
        self.guard.counts["timed_out"] += 1
        message = f"the request head did not arrive within {self.guard.header_timeout:g} s"
        self._close(raw_error(408, message, "request_timeout") if self._partial_head() else None)

    def _body_timed_out(self) -> None:
        self._deadline = None
        if self.phase not in (BODY, DRAIN):
            return
        self.guard.counts["timed_out"] += 1
        answered = self.cycle is not None and self.cycle.response_started
        message = f"the request body did not arrive within {self.guard.body_timeout:g} s"
        self._close(None if answered else raw_error(408, message, "request_timeout"))

    def evict(self) -> None:
        """Closed to make room: quietly when nothing was sent since the last reply, else with a 503."""
        if self._partial_head():
            retry = (("retry-after", str(self.guard.retry_after)),)
            self._close(raw_error(503, "too many open connections; retry", "server_busy", retry))
        else:
            self._close()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stall is None:
            self._stall = self.loop.call_later(self.guard.send_timeout, self._send_stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel_stall()

    def _cancel_stall(self) -> None:
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None

    def _send_stalled(self) -> None:
        self._stall = None
        self.guard.counts["timed_out"] += 1
        self._enter(CLOSED)
        self.transport.abort()  # the buffer will not drain: close() would wait for it forever

    # -- malformed requests ------------------------------------------------------------------------------
    def send_400_response(self, msg: str) -> None:
        if self.cycle is not None and self.cycle.response_started and not self.cycle.response_complete:
            self._close()  # mid-reply (e.g. broken chunked body): no second status line
            return
        limit = self.config.h11_max_incomplete_event_size or MAX_HEAD_BYTES
        if len(self.conn.trailing_data[0]) > limit:
            reply = raw_error(431, f"the request head is over {limit} bytes", "request_header_too_large")
        else:
            reply = raw_error(400, "malformed HTTP request", "invalid_http_request")
        self._close(reply)

    def _unsupported_upgrade_warning(self) -> None:
        pass  # an Upgrade header is answered as plain HTTP; no log line per stranger's request


def guarded_protocol(guard: ConnectionGuard) -> type[GuardedH11Protocol]:
    """The protocol class to give uvicorn (`http=`), bound to one server's guard."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": guard})
