"""Loopback ports for the cluster tests: a free one, and waiting until a helper listens on it."""

from __future__ import annotations

import socket
import subprocess
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen | None = None, timeout: float = 20) -> None:
    """Return once 127.0.0.1:port accepts a connection; fail if proc exits first or the timeout passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc is None or proc.poll() is None, (
            f"the process for port {port} exited with {proc.returncode}"
        )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")
