"""`edgepilot tune`'s pick vs the exhaustive sweep's best, and the wall time of each.

    python benchmarks/tune_vs_sweep.py               # both models, tune's defaults (pp256 / tg32, 3 reps)
    python benchmarks/tune_vs_sweep.py --models smollm2 -p 128 -n 16

Both use the same measuring bench (edgepilot.bench.lab.EngineLab: pinning, warm-ups, context switches) and the
same per-measurement settings. The exhaustive sweep measures pp and tg for every thread count on every
cluster-prefix core set, every ubatch tune considers, flash attention off and on. The pick is then judged
twice: by the sweep's own figures (its value for tune's settings / its best), and head to head: tune's
settings and the sweep's winner measured again in alternation (median of paired ratios), since a sweep's
best of many noisy figures is biased upwards.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edgepilot.bench.coresets import device_sets  # noqa: E402
from edgepilot.bench.lab import EngineLab  # noqa: E402
from edgepilot.bench.search import Candidate, Search, SearchConfig, exhaustive, ubatch_candidates  # noqa: E402
from edgepilot.device.cpu import read_cpu  # noqa: E402
from edgepilot.device.cpusets import cpulist  # noqa: E402
from edgepilot.gguf.resolve import bundled_model_path  # noqa: E402
from edgepilot.tuned.pinning import allowed_cpus  # noqa: E402
from run_speed import smollm2_path  # noqa: E402


def show(c: Candidate) -> str:
    return f"t{c.n_threads}@{cpulist(c.cpus)} ub{c.n_ubatch} fa{int(c.flash_attn)}"


def head_to_head(path: Path, a: Candidate, b: Candidate, test: str, p: int, n: int, reps: int) -> float:
    """Median of paired ratios a/b, alternating which goes first; one engine per side (no reloads)."""
    ratios = []
    with EngineLab(path, p, n) as lab_a, EngineLab(path, p, n) as lab_b:
        for i in range(reps):
            sides = ((lab_a, a), (lab_b, b)) if i % 2 == 0 else ((lab_b, b), (lab_a, a))
            got = {}
            for lab, cand in sides:
                lab.pinned_to = None  # the other lab may have moved the process: pin again
                got[id(lab)] = lab.measure(cand, test, 1)[0]
            ratios.append(got[id(lab_a)] / got[id(lab_b)])
    return statistics.median(ratios)


def compare(name: str, path: Path, p: int, n: int, reps: int, h2h_reps: int) -> None:
    sets = device_sets(read_cpu(Path("/")), allowed_cpus())
    ubatches = ubatch_candidates(p)

    t0 = time.perf_counter()
    with EngineLab(path, p, n) as lab:
        result = Search(sets, lab, SearchConfig(reps=reps, ubatches=ubatches)).run()
        tune_reps, tune_loads = lab.reps, f"{lab.loads} load(s), {lab.contexts} context switches"
    tune_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    with EngineLab(path, p, n) as lab:
        grid = exhaustive(sets, lab, reps, ubatches)
        sweep_reps, sweep_loads = lab.reps, f"{lab.loads} load(s), {lab.contexts} context switches"
    sweep_s = time.perf_counter() - t0

    # ubatch does not change single-token decoding: the sweep's tg figures for one (threads, cores, fa) at
    # every ubatch are repeated measurements of one setting, so they are pooled (median).
    def key(c: Candidate, test: str) -> tuple:
        return (test, c.n_threads, c.cpus, c.flash_attn) + ((c.n_ubatch,) if test == "pp" else ())

    pooled: dict[tuple, list[float]] = {}
    for t in grid:
        pooled.setdefault(key(t.candidate, t.test), []).extend(t.samples)
    value = {k: statistics.median(v) for k, v in pooled.items()}
    best = {
        test: max((t for t in grid if t.test == test), key=lambda t: value[key(t.candidate, test)])
        for test in ("tg", "pp")
    }
    picks = {"tg": result.gen, "pp": result.prompt}
    print(f"\n{name}: core sets {[cpulist(s) for s in sets]}, pp{p} / tg{n}, {reps} reps per measurement")
    print(
        f"  time   tune {tune_s:6.1f} s ({tune_reps} reps, {tune_loads})   "
        f"sweep {sweep_s:6.1f} s ({sweep_reps} reps, {sweep_loads})   ratio {tune_s / sweep_s:.3f}"
    )
    for test in ("tg", "pp"):
        pick, top = picks[test], best[test]
        in_sweep = value.get(key(pick, test), float("nan")) / value[key(top.candidate, test)]
        same = key(pick, test) == key(top.candidate, test)
        h2h = 1.0 if same else head_to_head(path, pick, top.candidate, test, p, n, h2h_reps)
        print(
            f"  {test}     tune {show(pick):<22} sweep best {show(top.candidate):<22} "
            f"in-sweep {in_sweep:.3f}   head-to-head {h2h:.3f}{'  (same settings)' if same else ''}"
        )
    sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gemma3,smollm2", help="comma list of: gemma3, smollm2")
    ap.add_argument("-p", "--n-prompt", type=int, default=256)
    ap.add_argument("-n", "--n-gen", type=int, default=32)
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--h2h-reps", type=int, default=10, help="alternating pairs in the head-to-head check")
    args = ap.parse_args()
    paths = {"gemma3": bundled_model_path, "smollm2": smollm2_path}
    for name in args.models.split(","):
        compare(name, paths[name](), args.n_prompt, args.n_gen, args.reps, args.h2h_reps)


if __name__ == "__main__":
    from edgepilot.engine import llama_log

    llama_log.install(echo=False)
    main()
