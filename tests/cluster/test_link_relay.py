"""The test harness's own link (relay.py): its round trip and its rate hold the profile, within tolerance,
so the speed tests measure the link they claim to."""

from __future__ import annotations

import socket
import statistics
import threading
import time

import pytest
from relay import Relay

from edgepilot.cluster.link import PROFILES, Link


def _server(handle) -> tuple[socket.socket, int]:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener, listener.getsockname()[1]


def _echo(conn: socket.socket) -> None:
    with conn:
        while data := conn.recv(65536):
            conn.sendall(data)


def _sink(conn: socket.socket) -> None:
    """Reads an 8-byte length, then that many bytes, then answers one byte."""
    with conn:
        want = int.from_bytes(conn.recv(8, socket.MSG_WAITALL), "little")
        while want > 0:
            want -= len(conn.recv(min(want, 1 << 20)))
        conn.sendall(b"k")


@pytest.mark.parametrize("name", list(PROFILES))
def test_relay_round_trip_and_rate_hold_the_profile(name):
    link = PROFILES[name]
    listener, port = _server(_echo)
    relay = Relay(port, link)
    try:
        with socket.create_connection(("127.0.0.1", relay.port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            rtts = []
            for _ in range(9):
                t0 = time.perf_counter()
                s.sendall(b"x")
                assert s.recv(1) == b"x"
                rtts.append(time.perf_counter() - t0)
        rtt = statistics.median(rtts)
        # never faster than the link; slower only by what a busy machine's scheduler adds
        assert link.rtt_s <= rtt <= link.rtt_s * 1.5 + 0.005, (rtt, link)
    finally:
        relay.close()
        listener.close()

    listener, port = _server(_sink)
    relay = Relay(port, link)
    n = int(link.rate_bits / 8 * 0.3)  # 0.3 s worth of bytes at the link's rate
    try:
        with socket.create_connection(("127.0.0.1", relay.port)) as s:
            t0 = time.perf_counter()
            s.sendall(n.to_bytes(8, "little") + bytes(n))
            assert s.recv(1) == b"k"
            took = time.perf_counter() - t0
        rate = n * 8 / (took - link.rtt_s)
        assert 0.8 * link.rate_bits <= rate <= 1.05 * link.rate_bits, (rate, link)
        assert relay.counted()["up"] == n + 8 and relay.counted()["down"] == 1
    finally:
        relay.close()
        listener.close()


def test_an_unshaped_relay_passes_bytes_through_unchanged():
    listener, port = _server(_echo)
    relay = Relay(port)
    payload = bytes(range(256)) * 4096
    try:
        with socket.create_connection(("127.0.0.1", relay.port)) as s:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            got = b"".join(iter(lambda: s.recv(65536), b""))
        assert got == payload
        relay.link = Link(0.001, 1e9)  # a link set while connections are open applies to later bytes
        with socket.create_connection(("127.0.0.1", relay.port)) as s:
            t0 = time.perf_counter()
            s.sendall(b"y")
            assert s.recv(1) == b"y" and time.perf_counter() - t0 >= 0.002
    finally:
        relay.close()
        listener.close()
