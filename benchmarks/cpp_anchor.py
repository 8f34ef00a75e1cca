"""edgepilot's speed anchored on llama.cpp's own C++ tools, built by `edgepilot build` from the same commit.

    edgepilot build && python benchmarks/cpp_anchor.py      # both models, 2 threads, 9 alternating rounds
    python benchmarks/cpp_anchor.py --rounds 15 --models gemma3 --only run

Two comparisons per model (Gemma 3 270M Q4_K_M, SmolLM2 135M Q4_1), each in alternating rounds (who goes first
flips every round, so drift and other load hit both alike); the ratio is the median of the per-round ratios:

- bench: `edgepilot bench`'s measurement (edgepilot.bench.measure.Bencher, in this process) vs the built
  llama-bench with the same settings (threads, -p, -n, -b 2048, -ub 512, -fa 0, mmap, repack on, f16 KV);
  each side does --reps repetitions per round and reports their mean t/s, as llama-bench's avg_ts does.
- run: `edgepilot run --temp 0 --raw` (the CLI in a subprocess, streaming to a pipe) generation t/s vs the
  built llama-completion at the same settings (same prompt, -n, ctx, batch, threads, --temp 0, -no-cnv,
  --ignore-eos; run's prompt generates past -n without an end of generation, checked). llama-completion's
  figure is its `eval time` line: decode only, its sampling time excluded; run's gen_tps times the whole loop
  (sampling, detokenizing, printing each token). "+smpl" shows llama-completion with its sampling time added.

The machine may be shared: the spread (min-max of the per-round ratios) is printed next to each median.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edgepilot.engine.native_tools import find_tool  # noqa: E402
from edgepilot.gguf.resolve import bundled_model_path  # noqa: E402
from run_speed import smollm2_path  # noqa: E402  (benchmarks/ is not a package)

PROMPT = "Write a long story about a robot who learns to paint. Once upon a time,"
EVAL_LINE = re.compile(r"\beval time =\s*([\d.]+) ms /\s*(\d+) runs")  # decode of the generated tokens
SAMPLE_LINE = re.compile(r"sampling time =\s*([\d.]+) ms")
RUN_LINE = re.compile(r"generation (\d+) tok @ ([\d.]+) t/s")


def bench_rounds(path: Path, args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    from edgepilot.bench.measure import Bencher, bench_settings
    from edgepilot.engine.inprocess import LlamaEngine

    tool = find_tool("llama-bench")
    cmd = [
        str(tool),
        "-m",
        str(path),
        "-p",
        str(args.n_prompt),
        "-n",
        str(args.n_gen),
        "-t",
        str(args.threads),
    ]
    cmd += [
        "-b",
        "2048",
        "-ub",
        "512",
        "-fa",
        "0",
        "-lm",
        "mmap",
        "--repack",
        "1",
        "-ctk",
        "f16",
        "-ctv",
        "f16",
    ]
    cmd += ["-r", str(args.reps), "-o", "json"]
    pairs: dict[str, list[tuple[float, float]]] = {"pp": [], "tg": []}
    settings = bench_settings(args.n_prompt, args.n_gen, args.threads)
    with LlamaEngine(path, settings) as engine:
        ep = Bencher(engine)
        ep.warmup(args.n_prompt, args.n_gen)

        def ours() -> dict[str, float]:
            pp = statistics.mean(ep.pp(args.n_prompt).ts for _ in range(args.reps))
            tg = statistics.mean(ep.tg(args.n_gen).ts for _ in range(args.reps))
            return {"pp": pp, "tg": tg}

        def cpp() -> dict[str, float]:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=True)
            got = {}
            for row in json.loads(done.stdout):
                got["pp" if row["n_prompt"] else "tg"] = float(row["avg_ts"])
            return got

        for rnd in range(args.rounds):
            first, second = (ours, cpp) if rnd % 2 == 0 else (cpp, ours)
            a, b = first(), second()
            e, c = (a, b) if first is ours else (b, a)
            for test in pairs:
                pairs[test].append((e[test], c[test]))
            print(
                f"  bench round {rnd + 1}: pp {e['pp']:.1f}/{c['pp']:.1f}  tg {e['tg']:.1f}/{c['tg']:.1f}",
                flush=True,
            )
    return pairs


def run_rounds(path: Path, args: argparse.Namespace) -> dict[str, list[tuple[float, float]]]:
    n, ctx = args.n_gen, 512
    ours = [sys.executable, "-m", "edgepilot", "run", str(path), "-p", PROMPT, "-n", str(n), "--temp", "0"]
    ours += ["--raw", "-t", str(args.threads), "--ctx", str(ctx), "--batch", "512", "--ubatch", "512"]
    ours += ["--kv", "f16", "--no-flash-attn"]
    tool = find_tool("llama-completion")
    cpp = [str(tool), "-m", str(path), "-p", PROMPT, "-n", str(n), "--temp", "0", "-no-cnv", "--ignore-eos"]
    cpp += ["-t", str(args.threads), "-c", str(ctx), "-b", "512", "-ub", "512", "-fa", "off"]
    cpp += ["-ctk", "f16", "-ctv", "f16", "-lm", "mmap", "--no-warmup"]
    env = dict(os.environ, EDGEPILOT_DATA_DIR=tempfile.mkdtemp(prefix="anchor-"))  # no tuned profile applies

    def run_ours() -> tuple[float, str]:
        done = subprocess.run(ours, capture_output=True, text=True, timeout=600, env=env, check=True)
        match = RUN_LINE.search(done.stdout)
        if not match or int(match.group(1)) != n:
            raise SystemExit(f"edgepilot run did not generate {n} tokens: {done.stdout[-300:]}")
        return float(match.group(2)), done.stdout[: done.stdout.rfind("\nprompt ")].strip()

    def run_cpp() -> tuple[float, float, str]:
        done = subprocess.run(cpp, capture_output=True, text=True, timeout=600, check=True)
        ev, sm = EVAL_LINE.search(done.stderr), SAMPLE_LINE.search(done.stderr)
        if not ev or not sm:
            raise SystemExit(f"no timing lines from llama-completion: {done.stderr[-300:]}")
        ms, runs = float(ev.group(1)), int(ev.group(2))
        return 1000 * runs / ms, 1000 * runs / (ms + float(sm.group(1))), done.stdout

    pairs: dict[str, list[tuple[float, float]]] = {"run": [], "run+smpl": []}
    same_text = True
    for rnd in range(args.rounds):
        if rnd % 2 == 0:
            (e, text), (c, c_smpl, c_text) = run_ours(), run_cpp()
        else:
            (c, c_smpl, c_text), (e, text) = run_cpp(), run_ours()
        same_text &= text[:200] in c_text
        pairs["run"].append((e, c))
        pairs["run+smpl"].append((e, c_smpl))
        print(f"  run round {rnd + 1}: {e:.1f}/{c:.1f} (+smpl {c_smpl:.1f})", flush=True)
    print(f"  greedy text identical to llama-completion's: {'yes' if same_text else 'NO'}")
    return pairs


def summary(name: str, pairs: dict[str, list[tuple[float, float]]]) -> list[str]:
    lines = []
    for test, values in pairs.items():
        ratios = [e / c for e, c in values]
        ours = statistics.median(e for e, _ in values)
        theirs = statistics.median(c for _, c in values)
        lines.append(
            f"{name:<8} {test:<9} {ours:>8.1f} {theirs:>8.1f}  {statistics.median(ratios):>6.3f}  "
            f"{min(ratios):.3f}-{max(ratios):.3f}"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gemma3,smollm2", help="comma list of: gemma3, smollm2")
    ap.add_argument("--only", choices=("bench", "run"), help="only one of the two comparisons")
    ap.add_argument("-p", "--n-prompt", type=int, default=128)
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-r", "--reps", type=int, default=3, help="bench repetitions per side per round")
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    paths = {"gemma3": bundled_model_path, "smollm2": smollm2_path}
    table = []
    for name in args.models.split(","):
        path = paths[name]()
        print(f"{name}: {path.name}", flush=True)
        if args.only != "run":
            table += summary(name, bench_rounds(path, args))
        if args.only != "bench":
            table += summary(name, run_rounds(path, args))
    print(
        f"\n-p {args.n_prompt} -n {args.n_gen} -t {args.threads}, median of {args.rounds} alternating rounds"
    )
    print(f"{'model':<8} {'test':<9} {'ours t/s':>8} {'C++ t/s':>8}  {'ratio':>6}  spread")
    print("\n".join(table))


if __name__ == "__main__":
    from edgepilot.engine import llama_log

    llama_log.install(echo=False)
    main()
