"""Loopback ports for the cluster tests: a free one, and waiting until a helper listens on it; helpers in
cgroup memory limits, planned, started and stopped, and their measured peaks."""

from __future__ import annotations

import socket
import subprocess
import time
from typing import Any


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


def loopback_plan(model: str, budgets: list[int], n_ctx: int, main_budget: int) -> tuple[list, Any]:
    """Helpers on free loopback ports with these budgets, and the cluster plan for them: (helpers, plan)."""
    from edgepilot.cluster.plan import Helper, plan_cluster

    ports = [free_port() for _ in budgets]
    helpers = [Helper("127.0.0.1", p, b) for p, b in zip(ports, budgets, strict=True)]
    return helpers, plan_cluster(model, helpers, n_ctx=n_ctx, main_budget=main_budget)


def stop_helpers(procs: list, limits: list) -> None:
    """Stop what start_helpers_in_limits started (and any limit appended since) and remove their limits."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    for limit in limits:
        limit.__exit__()


def vmhwm(pid: int) -> int:
    """A process's peak resident memory (VmHWM), in bytes."""
    from edgepilot.device.process import rss_bytes

    peak = rss_bytes(pid)[1]
    assert peak is not None, f"no VmHWM for {pid}"
    return peak
