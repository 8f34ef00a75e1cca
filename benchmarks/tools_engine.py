"""`edgepilot run` through llama.cpp's own llama-server (the tools engine) against llama-server called
directly with the same settings, and the in-process engine beside both.

    edgepilot build && python benchmarks/tools_engine.py            # both models, 7 alternating rounds
    python benchmarks/tools_engine.py --rounds 11 --models smollm2 -n 128
    python benchmarks/tools_engine.py --server /usr/bin/llama-server  # a packaged llama.cpp instead

Per round, in an order that rotates every round (so drift and other load hit all alike):
- direct: llama-server started by hand with the command line edgepilot's tools engine uses (same model,
  context, batch, threads, KV types, flash attention), one /completion request (the same prompt tokens,
  -n, greedy, ignore_eos) over its socket; its `timings.predicted_per_second` is the figure;
- tools: `edgepilot run --engine tools --temp 0 --raw --json` (the CLI in a subprocess): its gen_tps, which is
  the same server-side figure read through edgepilot;
- inprocess: `edgepilot run --engine inprocess` likewise (llama-cpp-python in the process), when installed.
Printed: medians of t/s and of the per-round ratios tools/direct (the ≥ 0.98 target) and inprocess/direct,
with the min-max spread. On a shared machine the spread says how much the figure can be trusted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edgepilot.engine.choice import choose_engine  # noqa: E402
from edgepilot.engine.native_tools import find_tool  # noqa: E402
from edgepilot.engine.server_engine import ServerEngine  # noqa: E402
from edgepilot.engine.unix_http import UnixClient  # noqa: E402
from edgepilot.gguf.resolve import bundled_model_path  # noqa: E402
from edgepilot.plan.settings import EngineSettings  # noqa: E402
from run_speed import smollm2_path  # noqa: E402  (benchmarks/ is not a package)

PROMPT = "Write a long story about a robot who learns to paint. Once upon a time,"
EDGEPILOT = [sys.executable, "-m", "edgepilot"]


def run_cli(model: Path, engine: str, args: argparse.Namespace, env: dict[str, str]) -> dict:
    cmd = [*EDGEPILOT, "run", str(model), "-p", PROMPT, "-n", str(args.n_gen), "--temp", "0", "--raw"]
    cmd += ["--ctx", str(args.ctx), "--threads", str(args.threads), "--engine", engine, "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    if done.returncode != 0:
        raise SystemExit(f"edgepilot run --engine {engine} failed: {done.stderr[-1500:]}")
    return json.loads(done.stdout)


def run_direct(model: Path, settings: EngineSettings, tool: Path, args: argparse.Namespace) -> float:
    """llama-server with the tools engine's own argv, driven by one bare /completion request."""
    with ServerEngine(model, settings, tool=tool) as server:
        tokens = server.tokenize(PROMPT)  # the same tokens edgepilot sends (--raw: no template)
        body = {"prompt": tokens, "n_predict": args.n_gen, "temperature": 0, "ignore_eos": True}
        body["cache_prompt"] = False
        status, data = UnixClient(server.socket_path).request("POST", "/completion", body)
        if status != 200:
            raise SystemExit(f"llama-server answered HTTP {status}: {data[:300]!r}")
        timings = json.loads(data)["timings"]
        return float(timings["predicted_per_second"])


def median_spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--models", default="gemma3,smollm2")
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--server", type=Path, help="llama-server to use (default: the built one, else PATH)")
    args = ap.parse_args()
    tool = args.server or find_tool("llama-server")
    env = dict(os.environ)
    env["EDGEPILOT_DATA_DIR"] = tempfile.mkdtemp(prefix="ep-bench-")  # no tuned profile changes the settings
    if args.server:
        env["PATH"] = f"{args.server.parent}{os.pathsep}{env.get('PATH', '')}"
    try:
        inprocess = choose_engine("inprocess").kind == "inprocess"
    except Exception:
        inprocess = False
    paths = {"gemma3": bundled_model_path, "smollm2": smollm2_path}
    print(f"llama-server: {tool}  ·  {args.rounds} rounds  ·  -n {args.n_gen}  ·  ctx {args.ctx}")
    for name in args.models.split(","):
        model = paths[name]()
        kinds = ["direct", "tools"] + (["inprocess"] if inprocess else [])
        tps: dict[str, list[float]] = {k: [] for k in kinds}
        settings = None
        for r in range(args.rounds):
            order = kinds[r % len(kinds) :] + kinds[: r % len(kinds)]
            for kind in order:
                if kind == "direct":
                    if settings is None:  # what edgepilot decided: the direct run uses exactly that
                        settings = EngineSettings(**run_cli(model, "tools", args, env)["settings"])
                    tps[kind].append(run_direct(model, settings, tool, args))
                else:
                    tps[kind].append(run_cli(model, kind, args, env)["gen_tps"])
            time.sleep(0.2)
        print(f"\n{name}: generation t/s, median (min-max) of {args.rounds} rounds")
        for kind in kinds:
            print(f"  {kind:<10} {median_spread(tps[kind])}")
        for kind in kinds[1:]:
            ratios = [a / b for a, b in zip(tps[kind], tps["direct"], strict=True)]
            print(f"  {kind}/direct  {median_spread(ratios)}")


if __name__ == "__main__":
    main()
