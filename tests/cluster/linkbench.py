"""Measured speed of a split over a link: real rpc-server helpers, each behind a Relay, and llama.cpp's
llama-server on the main device; generation and prompt t/s from the server's own timings.

The model loads over an unshaped relay (a one-off that would take minutes at 10 Mbit), then the link is set
and each measurement runs over it. Used by test_link_speed.py and benchmarks/link_speed.py.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from contextlib import ExitStack, contextmanager
from pathlib import Path

from netkit import free_port, wait_listening
from relay import Relay

from edgepilot.cluster.link import Link

PROMPT = "The quick brown fox jumps over the lazy dog. " * 12  # ~120 tokens
N_GEN = 64


class Server:
    def __init__(self, tool: Path, model: Path, extra: list[str], n_ctx: int, threads: int) -> None:
        self.port = free_port()
        argv = [str(tool), "-m", str(model), "-c", str(n_ctx), "-t", str(threads), "-np", "1"]
        argv += ["--port", str(self.port), "--host", "127.0.0.1", *extra]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while True:
            assert self.proc.poll() is None, f"llama-server exited with {self.proc.returncode}"
            assert time.monotonic() < deadline, "llama-server did not become ready in 120 s"
            try:
                self._call("/health", None, 2)
                break
            except OSError:
                time.sleep(0.2)

    def _call(self, path: str, body: dict | None, timeout: float) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.load(resp)

    def measure(self, n_gen: int = N_GEN, reps: int = 1) -> tuple[float, float, int]:
        """(generation t/s, prompt t/s, prompt tokens), the best of `reps` answers (the least disturbed by
        whatever else this machine runs)."""
        gen, prompt, n_prompt = 0.0, 0.0, 0
        for _ in range(reps):
            body = {"prompt": PROMPT, "n_predict": n_gen, "temperature": 0, "cache_prompt": False}
            t = self._call("/completion", body | {"ignore_eos": True}, 300)["timings"]
            gen, prompt = max(gen, t["predicted_per_second"]), max(prompt, t["prompt_per_second"])
            n_prompt = t["prompt_n"]
        return gen, prompt, n_prompt

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def _helper(tool: Path, threads: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    argv = [str(tool), "--host", "127.0.0.1", "--port", str(port), "--threads", str(threads)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc)
    except AssertionError:
        proc.kill()
        raise
    return proc, port


class Pool:
    """The split: helpers behind relays; `link` sets every relay's link."""

    def __init__(self, server: Server, relays: list[Relay]) -> None:
        self.server, self.relays = server, relays

    def set_link(self, link: Link | None) -> None:
        for r in self.relays:
            r.link = link


@contextmanager
def pool(
    rpc_tool: Path,
    server_tool: Path,
    model: Path,
    tensor_split: list[float],
    n_ctx: int = 1024,
    threads: int = 1,
    n_gpu_layers: int = 999,
    override_tensor: str | None = None,
):
    """len(tensor_split) helpers; the last n_gpu_layers layers (output included) on them, the rest on this
    device (llama.cpp's -ngl; the default: all on the helpers); override_tensor: llama.cpp's -ot (the plan's
    `token_embd\\.weight=CPU` keeps a tied output on this device)."""
    with ExitStack() as stack:
        relays = []
        for _ in tensor_split:
            proc, port = _helper(rpc_tool, threads)
            stack.callback(lambda p=proc: (p.kill(), p.wait(10)))
            relay = Relay(port)
            stack.callback(relay.close)
            relays.append(relay)
        rpc = ",".join(f"127.0.0.1:{r.port}" for r in relays)
        extra = [
            "-ngl",
            str(n_gpu_layers),
            "--rpc",
            rpc,
            "--tensor-split",
            ",".join(f"{s:g}" for s in tensor_split),
        ]
        if override_tensor is not None:
            extra += ["-ot", override_tensor]
        server = Server(server_tool, model, extra, n_ctx, threads)
        stack.callback(server.stop)
        yield Pool(server, relays)


def plan_pool(rpc_tool: Path, server_tool: Path, plan, threads: int = 1):
    """The pool exactly as the ClusterPlan's llama-server command sets it up: its -c, -ngl, --tensor-split
    and -ot (the helpers' addresses are the relays', on loopback)."""
    cmd = plan.main_command
    ot = cmd[cmd.index("-ot") + 1] if "-ot" in cmd else None
    return pool(
        rpc_tool, server_tool, Path(plan.model), plan.tensor_split, plan.n_ctx, threads, plan.n_gpu_layers, ot
    )


@contextmanager
def single(server_tool: Path, model: Path, n_ctx: int = 1024, threads: int = 1):
    """The whole model on this device: the single-device speed the plan takes as its input."""
    server = Server(server_tool, model, ["-ngl", "0"], n_ctx, threads)
    try:
        yield server
    finally:
        server.stop()
