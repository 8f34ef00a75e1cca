"""The front's bounds per connection (serve/connections.py), on loopback with short timeouts: the real front
on the real uvicorn config `edgepilot serve` uses, in this process; no model (its worker is not running,
so a generation is answered 503 "loading", which is all these tests need of it)."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import uvicorn
from servekit import parse_reply, read_to_close, trickle

from edgepilot.serve.config import ServeConfig
from edgepilot.serve.connections import LINGER
from edgepilot.serve.front import Front
from edgepilot.serve.listen import bind_front
from edgepilot.serve.server import front_config
from edgepilot.serve.state import ServerState

KEY = "conn-test-key"
HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 1.5
SEND_TIMEOUT = 1.0
SLACK = 1.5  # a busy 2-core machine


@dataclass
class Running:
    port: int
    state: ServerState

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)


@contextlib.contextmanager
def running_front(**overrides: object) -> Iterator[Running]:
    settings = {
        "api_key": KEY,
        "header_timeout": HEADER_TIMEOUT,
        "body_timeout": BODY_TIMEOUT,
        "send_timeout": SEND_TIMEOUT,
        **overrides,
    }
    config = ServeConfig(**settings).validate()  # type: ignore[arg-type]
    state = ServerState("m", config.retry_after)
    front = Front(config, state, "/nonexistent/worker.sock", lambda _m: None)
    sock = bind_front("127.0.0.1", 0)
    server = uvicorn.Server(front_config(front))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    try:
        yield Running(sock.getsockname()[1], state)
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


def test_a_connection_that_sends_nothing_is_closed_after_the_header_timeout():
    with running_front() as front, front.connect() as s:
        t0 = time.monotonic()
        data, _ = read_to_close(s, HEADER_TIMEOUT + 10)
        waited = time.monotonic() - t0
        assert data == b""  # nothing was asked: closed without a word
        assert HEADER_TIMEOUT - 0.2 <= waited <= HEADER_TIMEOUT + SLACK
        assert front.state.connections["timed_out"] == 1


def test_a_trickled_head_is_cut_after_the_header_timeout_in_total():
    with running_front() as front, front.connect() as s:
        # a byte every 0.2 s: a timeout reset by each byte would never fire
        data, took = trickle(s, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"x", 0.2, 10 * HEADER_TIMEOUT)
        assert HEADER_TIMEOUT - 0.2 <= took <= HEADER_TIMEOUT + SLACK
        status, headers, body = parse_reply(data)
        assert status == 408 and headers["connection"] == "close"
        assert body["error"]["code"] == "request_timeout" and "head" in body["error"]["message"]


def test_a_timed_out_client_still_sending_is_not_reset():
    # A reset can destroy the 408 before the client reads it (a close with its bytes unread sends one): the
    # server ends its side and drops what still comes, for a while, instead.
    with running_front() as front, front.connect() as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(HEADER_TIMEOUT + 0.5)  # the 408 is out
        s.sendall(b"X-Late: 1\r\n")
        time.sleep(0.3)
        s.sendall(b"X-Later: 1\r\n")  # a fully closed socket would have answered the first with a reset
        data, reset = read_to_close(s, 5)
        assert not reset and parse_reply(data)[0] == 408
        t0 = time.monotonic()
        with pytest.raises(OSError):  # but not for ever: after LINGER the server closes and resets
            while time.monotonic() - t0 < LINGER + 10:
                s.sendall(b"x")
                time.sleep(0.1)
        assert time.monotonic() - t0 <= LINGER + SLACK


def test_a_trickled_body_is_cut_after_the_body_timeout_in_total():
    head = (
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {KEY}\r\nContent-Length: 1000\r\n\r\n"
    ).encode()
    with running_front() as front, front.connect() as s:
        data, took = trickle(s, head, b" ", 0.2, 10 * BODY_TIMEOUT)
        assert BODY_TIMEOUT - 0.2 <= took <= BODY_TIMEOUT + SLACK
        status, _, body = parse_reply(data)
        assert status == 408 and body["error"]["code"] == "request_timeout"
        assert "body" in body["error"]["message"]


def test_a_body_trickled_after_a_refusal_is_cut_too():
    # No key: the front answers 401 at once, without reading the body; uvicorn would go on reading it.
    head = b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n"
    with running_front() as front, front.connect() as s:
        t0 = time.monotonic()
        s.sendall(head)
        first = s.recv(65536)
        assert first.startswith(b"HTTP/1.1 401")
        _, took = trickle(s, b" ", b" ", 0.2, 10 * BODY_TIMEOUT)
        assert time.monotonic() - t0 <= BODY_TIMEOUT + SLACK
        assert took > 0


def test_the_next_head_on_a_kept_alive_connection_is_bounded_too():
    with running_front() as front, front.connect() as s:
        s.sendall(b"GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert s.recv(65536).startswith(b"HTTP/1.1 204")
        data, took = trickle(s, b"GET / HTTP/1.1\r\n", b"x", 0.2, 10 * HEADER_TIMEOUT)
        assert took <= HEADER_TIMEOUT + SLACK
        assert parse_reply(data)[0] == 408


def test_past_the_idle_cap_the_oldest_idle_connection_is_closed_first():
    with running_front(max_idle_connections=10, header_timeout=30.0) as front:
        partial = front.connect()
        partial.sendall(b"GET / HTTP/1.1\r\n")  # the oldest, with a request begun: told to retry
        time.sleep(0.3)
        idle = [front.connect() for _ in range(14)]
        time.sleep(0.5)
        status, headers, body = parse_reply(read_to_close(partial, 5)[0])
        assert status == 503 and int(headers["retry-after"]) >= 1
        assert body["error"]["code"] == "server_busy"
        for s in idle[:4]:  # the next oldest: closed quietly
            assert read_to_close(s, 5)[0] == b""
        for s in idle[4:]:  # the newest ten stay
            assert not select.select([s], [], [], 0)[0]
        # a client with a request to make still gets in, and its request is answered
        with front.connect() as s:
            head = f"GET /status.json HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n\r\n"
            s.sendall(head.encode())
            reply = s.recv(65536)
        assert reply.startswith(b"HTTP/1.1 200")
        assert front.state.connections["evicted"] >= 5
        for s in [partial, *idle]:
            s.close()


def test_a_flood_from_one_address_evicts_its_own_connections_first():
    def from_address(port: int, source: str) -> socket.socket:
        return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))

    with running_front(max_idle_connections=10, header_timeout=30.0) as front:
        other = from_address(front.port, "127.0.0.3")  # the oldest idle connection of all
        time.sleep(0.2)
        flood = [from_address(front.port, "127.0.0.2") for _ in range(15)]
        time.sleep(0.5)
        assert not select.select([other], [], [], 0)[0]  # still open
        for s in flood[:6]:
            assert read_to_close(s, 5)[0] == b""
        assert front.state.connections["evicted"] == 6
        for s in [other, *flood]:
            s.close()


def test_a_client_that_reads_nothing_is_dropped_after_the_send_timeout():
    n = 3000  # far more reply than the socket buffers hold
    request = b"GET /status.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with running_front() as front:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(10)
        s.connect(("127.0.0.1", front.port))
        with s:
            s.sendall(request * n)
            deadline = time.monotonic() + SEND_TIMEOUT + 10
            while front.state.connections["timed_out"] == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert front.state.connections["timed_out"] == 1
            data, reset = read_to_close(s, 5)
        one_reply = len(data) // max(1, data.count(b"HTTP/1.1 200"))
        assert reset or len(data) < n * one_reply  # cut off, not served to the end


@pytest.mark.parametrize(
    ("sent", "status", "code"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", 400, "invalid_http_request"),
        # a head that never ends: h11 stops buffering it at 16 KiB
        (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 20000, 431, "request_header_too_large"),
    ],
)
def test_malformed_requests_get_a_json_error(sent, status, code):
    with running_front() as front, front.connect() as s:
        s.sendall(sent)
        got, headers, body = parse_reply(read_to_close(s, 5)[0])
        assert got == status and headers["content-type"] == "application/json"
        assert body["error"]["code"] == code and body["error"]["type"] == "invalid_request_error"
