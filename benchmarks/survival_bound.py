"""The planner's context vs the largest context that really survives a memory limit equal to the budget.

    sudo python benchmarks/survival_bound.py                       # smollm2 @ 400 MiB, gemma3 @ 500 MiB
    sudo python benchmarks/survival_bound.py --cases smollm2:400MiB:no-mmap,gemma3:450MiB:fa+kv=q8_0

For each (model, budget): `edgepilot fit MODEL --budget B` picks its settings and context; then every run
is `edgepilot run` with those settings and a prompt that fills the context, inside a fresh cgroup v1 memory
group limited to B (the kernel OOM-kills it, as lmkd would on a phone). The planned context must survive;
then the context grows (to planned / 0.9 first: if that is killed, the plan is within 10 %) and is bisected
to the 256-cell granularity of llama.cpp's KV cache, giving the largest context that survives.

What the child is charged for, as on a phone after a cold start: the page cache is dropped, and the model
and llama.cpp's shared libraries are private copies (LLAMA_CPP_LIB_PATH), so their pages are charged to the
child. Pages of files other processes had mapped first (libpython, libc, numpy...) stay charged to those
processes' cgroups, yet lmkd counts them in the app's RSS: the first run at the planned context measures
them (peak RSS - the cgroup's rss + mapped_file) and every later run gets a limit lowered by that much.

Surviving means finishing without the OOM kill and without thrashing: mapped weight pages are clean, so
under the limit the kernel evicts and re-reads them instead of killing (0.3 t/s instead of 10). A run that
takes more than `--majflt-factor` x the planned run's major faults (refaults, what lmkd's thrashing
detection counts), or `--thrash-factor` x its wall time, did not survive.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edgepilot.doctor.cgroup import cgroup_problem  # noqa: E402
from memlab import MIB, run_in_cgroup  # noqa: E402
from memory_accuracy import (  # noqa: E402
    N_GEN,
    SLACK,
    SOURCE,
    Case,
    PromptMaker,
    case_argv,
    log,
    model_paths,
    use_source,
)

KV_CELLS = 256  # llama.cpp pads the KV cache to 256 cells: contexts between two steps cost the same
TARGET = 0.9


@dataclass
class Attempt:
    n_ctx: int
    limit_bytes: int
    verdict: str  # survived | killed | thrashed | failed rc=N
    wall_seconds: float
    peak_rss_bytes: int
    cgroup_max_usage_bytes: int
    uncharged_bytes: int  # resident pages charged to other cgroups (mapped by others first)
    majflt: int

    @property
    def survived(self) -> bool:
        return self.verdict == "survived"


@dataclass
class Bound:
    model: str
    budget_bytes: int
    planned_ctx: int
    predicted_peak_bytes: int
    settings: dict[str, Any]
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def fair(self) -> list[Attempt]:
        """The attempts under the corrected limit (all but the first, which measured the correction)."""
        return self.attempts[1:]

    @property
    def largest_surviving(self) -> int:
        return max((a.n_ctx for a in self.fair if a.survived), default=0)

    @property
    def smallest_failing(self) -> int | None:
        return min((a.n_ctx for a in self.fair if not a.survived), default=None)

    @property
    def ratio(self) -> float:
        return self.planned_ctx / self.largest_surviving if self.largest_surviving else 0.0


def cells_up(n: float) -> int:
    return int(math.ceil(n / KV_CELLS) * KV_CELLS)


def parse_case(text: str) -> tuple[str, int, Any]:
    """`model:budget[:flag+flag]`, flags as `edgepilot fit` takes them: no-mmap, fa, kv=q8_0, ubatch=128."""
    from edgepilot.plan.budget import parse_size
    from edgepilot.plan.requested import RequestedSettings

    model, _, rest = text.partition(":")
    size, _, flags = rest.partition(":")
    opts: dict[str, Any] = {}
    for flag in filter(None, flags.split("+")):
        key, _, value = flag.partition("=")
        if key == "no-mmap":
            opts["no_mmap"] = True
        elif key == "fa":
            opts["flash_attn"] = True
        elif key in ("kv", "ubatch"):
            opts[key] = value if key == "kv" else int(value)
        else:
            raise SystemExit(f"unknown flag {flag!r} in {text!r}")
    return model, parse_size(size), RequestedSettings.from_flags(**opts)


def private_libs(workdir: Path) -> dict[str, str]:
    """A copy of llama-cpp-python's shared libraries: their page cache is charged to the child's cgroup."""
    import llama_cpp

    src = Path(llama_cpp.__file__).parent / "lib"
    dest = workdir / "lib"
    shutil.copytree(src, dest, symlinks=True)
    return {"LLAMA_CPP_LIB_PATH": str(dest)}


@dataclass
class Prober:
    path: Path
    base: Case
    env: dict[str, str]
    prompts: PromptMaker
    majflt_factor: float
    thrash_factor: float
    reference: Attempt | None = None  # the planned run: its major faults and wall time are the baseline

    def attempt(self, n_ctx: int, limit: int) -> Attempt:
        case = Case(**{**self.base.__dict__, "ctx": n_ctx})
        prompt, _ = self.prompts.make(self.path, n_ctx - N_GEN - SLACK)
        self.prompts.close()  # the tokenizer's engine must not keep the model mapped in this process
        timeout = max(60.0, self.thrash_factor * self.reference.wall_seconds) if self.reference else None
        log(f"{case.id} under {limit / MIB:.1f} MiB ...")
        run = run_in_cgroup(
            case_argv(case, self.path, prompt),
            limit,
            model_path=str(self.path),
            env=self.env,
            timeout=timeout,
        )
        cg = run.cgroup
        stat = cg.get("peak_stat", {})
        charged_mapped = stat.get("rss", 0) + stat.get("mapped_file", 0)
        if run.killed and cg.get("oom_kill"):
            verdict = "killed"
        elif run.killed or (
            self.reference and run.ru_majflt > self.majflt_factor * self.reference.majflt + 32
        ):
            verdict = "thrashed"
        else:
            verdict = "survived" if run.returncode == 0 else f"failed rc={run.returncode}"
        a = Attempt(
            n_ctx,
            limit,
            verdict,
            run.wall_seconds,
            run.ru_maxrss_bytes,
            cg.get("max_usage_bytes", 0),
            max(0, run.at_peak_rss.get("VmRSS", 0) - charged_mapped),
            run.ru_majflt,
        )
        log(
            f"  ctx {n_ctx:6d}: {a.verdict:9s} peak RSS {a.peak_rss_bytes / MIB:6.1f} MiB, cgroup max "
            f"{a.cgroup_max_usage_bytes / MIB:6.1f} MiB, uncharged {a.uncharged_bytes / MIB:5.1f} MiB, "
            f"majflt {a.majflt}, {a.wall_seconds:.0f} s"
        )
        return a


def find_bound(
    label: str, model: str, path: Path, budget: int, requested: Any, common: dict[str, Any]
) -> Bound:
    """`common`: the Prober fields every case shares (env, prompts, majflt_factor, thrash_factor)."""
    from edgepilot.plan.fit import fit_model

    plan = fit_model(path, requested, budget_bytes=budget)
    s = plan.settings
    base = Case(
        model,
        s.n_ctx,
        ubatch=s.n_ubatch,
        kv=s.type_k,
        fa=bool(s.flash_attn),
        mmap=s.use_mmap,
        batch=s.n_batch,
    )
    bound = Bound(label, budget, plan.max_ctx, plan.memory.peak_rss_bytes, base.settings())
    if not plan.fits:
        log(f"{model}: the planner says nothing fits {budget / MIB:.0f} MiB")
        return bound
    log(
        f"{model} @ {budget / MIB:.0f} MiB: planned ctx {plan.max_ctx}, predicted peak "
        f"{plan.memory.peak_rss_bytes / MIB:.1f} MiB"
    )
    prober = Prober(path, base, **common)
    first = prober.attempt(plan.max_ctx, budget)
    bound.attempts.append(first)
    if not first.survived:
        return bound
    prober.reference = first
    limit = budget - first.uncharged_bytes
    planned = prober.attempt(plan.max_ctx, limit)
    bound.attempts.append(planned)
    if not planned.survived:
        return bound
    lo, hi = plan.max_ctx, cells_up(plan.max_ctx / TARGET)
    while True:  # grow until a context fails
        a = prober.attempt(hi, limit)
        bound.attempts.append(a)
        if not a.survived:
            break
        lo, hi = hi, cells_up(hi * 1.25)
    while hi - lo > KV_CELLS:  # bisect on the KV granularity
        mid = cells_up((lo + hi) / 2)
        if mid >= hi:
            break
        a = prober.attempt(mid, limit)
        bound.attempts.append(a)
        lo, hi = (mid, hi) if a.survived else (lo, mid)
    return bound


def report(bounds: list[Bound]) -> int:
    print(
        f"\n{'case':28s} {'budget':>8s} {'planned':>8s} {'largest ok':>10s} {'first fail':>10s} "
        f"{'planned/largest':>15s} {'cgroup limit':>12s}  predicted peak / measured at plan"
    )
    ok = True
    for b in bounds:
        plan_run = next((a for a in b.fair if a.n_ctx == b.planned_ctx), None)
        measured = f"{plan_run.peak_rss_bytes / MIB:.1f}" if plan_run else "-"
        limit = b.fair[0].limit_bytes if b.fair else b.budget_bytes
        print(
            f"{b.model:28s} {b.budget_bytes / MIB:6.0f}Mi {b.planned_ctx:8d} {b.largest_surviving:10d} "
            f"{b.smallest_failing or 0:10d} {b.ratio:15.3f} {limit / MIB:9.1f}Mi  "
            f"{b.predicted_peak_bytes / MIB:.1f} / {measured} MiB"
        )
        ok &= bool(plan_run and plan_run.survived and b.ratio >= TARGET)
    print(
        f"criterion: planned context survives and is >= {TARGET:.0%} of the largest surviving: "
        f"{'met' if ok else 'NOT met'}"
    )
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="smollm2:400MiB,gemma3:500MiB", help="model:budget, comma separated")
    ap.add_argument("--majflt-factor", type=float, default=2.0)
    ap.add_argument("--thrash-factor", type=float, default=5.0)
    ap.add_argument("--out", type=Path, help="write the attempts as JSON")
    ap.add_argument("--source", choices=("head", "worktree"), default="head")
    args = ap.parse_args()
    problem = cgroup_problem()
    if problem:
        print(f"survival bound skipped: {problem}", file=sys.stderr)
        return 2
    use_source(args.source)
    bounds = []
    with tempfile.TemporaryDirectory(prefix="edgepilot-bound-") as tmp_name:
        tmp = Path(tmp_name)
        common = {
            "env": {**os.environ, **private_libs(tmp)},
            "prompts": PromptMaker(tmp),
            "majflt_factor": args.majflt_factor,
            "thrash_factor": args.thrash_factor,
        }
        paths = model_paths()
        for text in args.cases.split(","):
            model, budget, requested = parse_case(text)
            copy = tmp / paths[model].name
            if not copy.exists():
                shutil.copyfile(paths[model], copy)
            bounds.append(find_bound(text, model, copy, budget, requested, common))
            if args.out:
                data = {"edgepilot": SOURCE["commit"], "bounds": [_json(b) for b in bounds]}
                args.out.write_text(json.dumps(data, indent=1) + "\n")
    return report(bounds)


def _json(b: Bound) -> dict[str, Any]:
    return {
        "model": b.model,
        "budget_bytes": b.budget_bytes,
        "planned_ctx": b.planned_ctx,
        "predicted_peak_bytes": b.predicted_peak_bytes,
        "settings": b.settings,
        "largest_surviving_ctx": b.largest_surviving,
        "ratio": round(b.ratio, 4),
        "attempts": [a.__dict__ for a in b.attempts],
    }


if __name__ == "__main__":
    sys.exit(main())
