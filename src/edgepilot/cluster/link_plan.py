"""`cluster plan --link`: the split's predicted speed over that link, beside the best alternative on the main
device alone (the model as it is, a shorter context or a smaller quantization: fit's planner decides what
fits), and which one is faster."""

from __future__ import annotations

from dataclasses import dataclass, field

from edgepilot.cluster.link import PROFILES, Link
from edgepilot.cluster.speed import SpeedPrediction, layer_bytes, predict
from edgepilot.cluster.split import tensors_by_layer
from edgepilot.errors import UserError
from edgepilot.gguf.requant_size import requantized_bytes
from edgepilot.plan.fit import fit_model, load_model_facts
from edgepilot.plan.requested import RequestedSettings

MAX_TPS = 1e6


@dataclass
class SingleDevice:
    """The main device alone: what it would run instead of the pool, and how fast."""

    description: str
    gen_tps: float
    prompt_tps: float
    peak_rss_bytes: int
    llama_cpp_args: list[str] = field(default_factory=list)


@dataclass
class LinkVerdict:
    pool: SpeedPrediction
    single: SingleDevice | None  # None: nothing fits on the main device alone
    pool_is_faster: bool
    summary: str
    speed_source: str = "given"  # where the single-device speed came from: given | bench-history | roofline
    speed_detail: str = ""
    other_links: dict[str, float] = field(default_factory=dict)  # profile -> the pool's generation t/s


def parse_speed(text: str) -> tuple[float, float]:
    """--speed GEN[,PROMPT]: the model's t/s on one device (edgepilot bench MODEL measures both)."""
    parts = str(text).split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or not all(0 < v <= MAX_TPS for v in values):
        raise UserError(
            f"--speed {text[:40]!r}: write GEN,PROMPT in tokens/s of this model on one device, e.g. 12.5,80 "
            "(`edgepilot bench MODEL` measures both)"
        )
    gen = values[0]
    return gen, values[1] if len(values) == 2 else gen


def _alternative(
    model: str, n_ctx: int, kv: str, gen: float, prompt: float, main_budget: int | None
) -> SingleDevice | None:
    fit = fit_model(model, RequestedSettings(n_ctx=n_ctx, type_k=kv, type_v=kv), budget_bytes=main_budget)
    peak = fit.memory.peak_rss_bytes
    if fit.fits:
        return SingleDevice("the same model on the main device alone", gen, prompt, peak, fit.llama_cpp_args)
    fitting = [a for a in fit.alternatives if a.fits]
    for a in fitting:  # a shorter context runs at the model's own speed: the best option if there is one
        if a.kind == "smaller-context":
            return SingleDevice(a.description, gen, prompt, a.peak_rss_bytes, a.llama_cpp_args)
    for a in fitting:
        if a.kind == "smaller-quant":
            # generation reads every weight per token: its speed scales with the weight bytes
            _, header, _ = load_model_facts(model)
            now = sum(t.n_bytes or 0 for t in header.tensors)
            then = requantized_bytes(header, a.description.split()[0])
            return SingleDevice(
                a.description, gen * now / max(1, then), prompt, a.peak_rss_bytes, a.llama_cpp_args
            )
    return None


def link_verdict(
    model: str,
    shares: list[tuple[str, int, int]],
    n_ctx: int,
    kv: str,
    link: Link,
    speed: tuple[float, float],
    main_budget: int | None = None,
    n_prompt: int = 128,
    speed_source: str = "given",
    speed_detail: str = "",
    output_on_main: bool = False,
) -> LinkVerdict:
    """shares: each helper's (name, first layer, end); speed: the whole model's generation and prompt t/s on
    one device (every device is taken as fast as that one); main_budget: None probes this device."""
    gen, prompt = speed
    _, header, arch = load_model_facts(model)
    weights = layer_bytes(tensors_by_layer(header, arch.n_layer))

    def over(a_link: Link) -> SpeedPrediction:
        return predict(
            arch,
            weights,
            shares,
            a_link,
            gen,
            prompt,
            n_ctx,
            n_prompt=n_prompt,
            output_on_main=output_on_main,
        )

    pool = over(link)
    single = _alternative(model, n_ctx, kv, gen, prompt, main_budget)
    pool_is_faster = single is None or pool.gen_tps > single.gen_tps
    figures = f"pool {pool.gen_tps:.1f} t/s generation, {pool.prompt_tps:.0f} t/s prompt over {link.label}"
    if single is None:
        summary = f"{figures}; nothing fits on the main device alone"
    else:
        alone = f"{single.description}: {single.gen_tps:.1f} t/s generation, {single.prompt_tps:.0f} prompt"
        verdict = "the pool is faster" if pool_is_faster else "the pool is SLOWER than one device"
        summary = f"{verdict}: {figures} vs {alone}"
    others = {name: round(over(other).gen_tps, 2) for name, other in PROFILES.items() if other != link}
    if speed_source != "given":
        summary += f" (one device's speed from {speed_source}: {gen:.1f} t/s generation, {prompt:.0f} prompt)"
    return LinkVerdict(pool, single, pool_is_faster, summary, speed_source, speed_detail, others)
