"""A real `edgepilot serve` (SmolLM2) under connections that ask for nothing, or ask too slowly: 200 idle
connections kept open (reopened as soon as the server closes one) and slowloris clients trickling heads and
bodies must not keep a keyed client from its answers; the server cuts each of them after its timeout."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field

import pytest
from servekit import KEY, Served, parse_reply, start_server, trickle, write_device

HEADER_TIMEOUT = 3.0
BODY_TIMEOUT = 4.0
SLACK = 2.5  # a busy 2-core machine, with a model generating
IDLE = 200
HOLD = 60.0  # seconds the flood lasts at least (the 60 s): many header timeouts
ASKS = 3  # keyed requests answered during the flood, at least


@pytest.fixture(scope="module")
def guarded(smollm_path, tmp_path_factory) -> Served:
    tmp = tmp_path_factory.mktemp("serve-hostile")
    write_device(tmp / "device")
    args = ["--ctx", "512", "--max-tokens", "16", "--watch-root", str(tmp / "device")]
    args += ["--header-timeout", str(HEADER_TIMEOUT), "--body-timeout", str(BODY_TIMEOUT)]
    server = start_server(smollm_path, *args, tmp=tmp)
    yield server
    assert server.stop() == 0, server.stderr()


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


@dataclass
class Flood:
    """`n` connections that never send a byte; those the server closed are reopened twice a second."""

    port: int
    n: int
    stop: threading.Event = field(default_factory=threading.Event)
    pause: float = 0.5
    closed_by_server: int = 0

    def run(self) -> None:
        sel = selectors.DefaultSelector()
        for _ in range(self.n):
            sel.register(_connect(self.port), selectors.EVENT_READ)
        while not self.stop.is_set():
            for key, _ in sel.select(0.2):
                s: socket.socket = key.fileobj  # type: ignore[assignment]
                with contextlib.suppress(ConnectionResetError):
                    assert s.recv(1) == b""  # nothing is said to a connection that asked nothing
                self.closed_by_server += 1
                sel.unregister(s)
                s.close()
                sel.register(_connect(self.port), selectors.EVENT_READ)
            time.sleep(self.pause)
        for key in list(sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]


@dataclass
class Slowloris:
    """Trickles a request (a head, or a keyed head and then its body) a byte at a time, again and again."""

    port: int
    first: bytes
    stop: threading.Event
    limit: float
    cuts: list[tuple[float, int | None]] = field(default_factory=list)  # (seconds until cut, status)
    failure: str | None = None

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with _connect(self.port) as s:
                    data, took = trickle(s, self.first, b"x", 0.25, self.limit)
            except AssertionError as exc:
                self.failure = str(exc)
                return
            self.cuts.append((took, parse_reply(data)[0] if data else None))


def test_idle_and_slow_connections_do_not_keep_a_keyed_client_waiting(guarded):
    stop = threading.Event()
    flood = Flood(guarded.port, IDLE, stop)
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
    body = (
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {KEY}\r\nContent-Length: 5000\r\n\r\n"
    ).encode()
    heads = [Slowloris(guarded.port, head, stop, HEADER_TIMEOUT + SLACK + 1) for _ in range(3)]
    bodies = [Slowloris(guarded.port, body, stop, BODY_TIMEOUT + SLACK + 1) for _ in range(2)]
    threads = [threading.Thread(target=x.run, daemon=True) for x in (flood, *heads, *bodies)]
    for t in threads:
        t.start()
    # as apps use it: a connection the server closed while it sat idle is retried on a new one
    client = guarded.client(max_retries=2, timeout=60)
    answers, latencies = [], []
    try:
        time.sleep(1.0)  # the flood is in place
        t0 = time.monotonic()
        while len(answers) < ASKS or time.monotonic() - t0 < HOLD:
            start = time.monotonic()
            reply = client.chat.completions.create(
                model="any", messages=[{"role": "user", "content": "Say hi."}], max_tokens=8
            )
            latencies.append(time.monotonic() - start)
            answers.append(reply.choices[0].message.content)
            time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert len(answers) >= ASKS and all(isinstance(a, str) for a in answers)
    assert max(latencies) < 60, latencies  # slow on a busy machine, never stuck
    # every idle connection was closed by the server (after the header timeout, or the oldest to make room)
    assert flood.closed_by_server >= IDLE
    for slow, timeout in [(h, HEADER_TIMEOUT) for h in heads] + [(b, BODY_TIMEOUT) for b in bodies]:
        assert slow.failure is None, slow.failure
        assert slow.cuts and all(took <= timeout + SLACK for took, _ in slow.cuts), slow.cuts
    # a trickled head is cut by its timeout (408) or closed to make room (503, JSON with Retry-After; or
    # without a word, None, when the server had not read its first bytes yet)
    head_statuses = [status for h in heads for _, status in h.cuts]
    assert set(head_statuses) <= {408, 503, None} and {408, 503} & set(head_statuses)
    # a keyed body is cut by the body timeout (408); its connection is evictable only while its head is still
    # on the way (the flood here comes from the same address), and then closed like any idle one
    body_statuses = {status for b in bodies for _, status in b.cuts}
    assert 408 in body_statuses and body_statuses <= {408, 503, None}
    # 200 idle connections against a cap of 128: the oldest were closed to make room, again and again
    connections = guarded.status()["connections"]
    assert connections["evicted"] >= IDLE - 128 and connections["timed_out"] >= len(bodies)


def test_idle_connections_are_closed_after_the_header_timeout(guarded):
    sel = selectors.DefaultSelector()
    opened = {}
    for _ in range(50):
        s = _connect(guarded.port)
        opened[s] = time.monotonic()
        sel.register(s, selectors.EVENT_READ)
    waited = []
    deadline = time.monotonic() + HEADER_TIMEOUT + 10
    while opened and time.monotonic() < deadline:
        for key, _ in sel.select(0.5):
            s = key.fileobj
            waited.append(time.monotonic() - opened.pop(s))
            sel.unregister(s)
            s.close()
    for s in opened:
        s.close()
    assert not opened, f"{len(opened)} of 50 idle connections still open after {HEADER_TIMEOUT + 10} s"
    assert all(HEADER_TIMEOUT - 0.3 <= w <= HEADER_TIMEOUT + SLACK for w in waited), waited
