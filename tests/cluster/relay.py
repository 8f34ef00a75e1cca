"""A network link on loopback for kernels without netem/tbf: a TCP relay that delays each direction by a
one-way latency and serializes it at a rate (a token bucket of no depth: a chunk leaves once the link has
sent everything before it, and arrives one latency later).

    relay = Relay(target_port); relay.link = Link(0.010, 50e6)  # connect to relay.port instead
    ...; relay.close()

The link can change while connections are open (a model loads unshaped, then is measured per profile);
`sent` counts the bytes per direction ("up": towards the target, "down": back) for traffic measurements.
Wi-Fi is half duplex; this link is full duplex, each direction at the full rate.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from edgepilot.cluster.link import Link  # noqa: E402

CHUNK = 64 * 1024


class _Direction:
    def __init__(self, relay: Relay, src: socket.socket, dst: socket.socket, name: str) -> None:
        self.relay, self.src, self.dst, self.name = relay, src, dst, name
        self.items: queue.Queue[tuple[float, bytes] | None] = queue.Queue()
        self.free_at = 0.0  # when the link has sent everything queued so far
        for target in (self._read, self._write):
            threading.Thread(target=target, daemon=True).start()

    def _read(self) -> None:
        try:
            while data := self.src.recv(CHUNK):
                now = time.perf_counter()
                link = self.relay.link
                if link is None:
                    self.items.put((now, data))
                    continue
                start = max(now, self.free_at)
                self.free_at = start + link.transfer_s(len(data))
                self.items.put((self.free_at + link.latency_s, data))
        except OSError:
            pass
        self.items.put(None)

    def _write(self) -> None:
        try:
            while (item := self.items.get()) is not None:
                due, data = item
                wait = due - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                with self.relay.lock:  # before sending: the peer may answer before this thread runs again
                    self.relay.sent[self.name] += len(data)
                self.dst.sendall(data)
            self.dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class Relay:
    def __init__(self, target_port: int, link: Link | None = None, host: str = "127.0.0.1") -> None:
        self.target = (host, target_port)
        self.link = link
        self.lock = threading.Lock()
        self.sent = {"up": 0, "down": 0}
        self.listener = socket.create_server((host, 0))
        self.port = self.listener.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            while True:
                client, _ = self.listener.accept()
                server = socket.create_connection(self.target)
                for s in (client, server):
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.conns += [client, server]
                _Direction(self, client, server, "up")
                _Direction(self, server, client, "down")
        except OSError:
            pass

    def counted(self) -> dict[str, int]:
        with self.lock:
            return dict(self.sent)

    def close(self) -> None:
        self.listener.close()
        for s in self.conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
