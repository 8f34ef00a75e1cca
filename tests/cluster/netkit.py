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


def start_helpers_in_limits(helpers: list, limits: list, procs: list) -> None:
    """Each helper's rpc-server in a cgroup v1 memory limit of its budget, listening when this returns.
    Appends to `limits` and `procs` as it goes: the caller's `finally` stops and removes what was started."""
    import os

    from edgepilot.cluster.rpc_server import rpc_server_command
    from edgepilot.doctor.cgroup import MemoryLimit

    for h in helpers:
        limit = MemoryLimit(h.budget_bytes).__enter__()
        limits.append(limit)
        cmd = rpc_server_command(h.host, h.port, threads=1)
        env = dict(os.environ, GGML_NO_BACKTRACE="1")
        procs.append(
            subprocess.Popen(
                limit.wrap(cmd.argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
            )
        )
    for h, proc in zip(helpers, procs, strict=True):
        wait_listening(h.port, proc)
