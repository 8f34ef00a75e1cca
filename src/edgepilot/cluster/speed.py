"""How fast a split runs over a link: per-token traffic at each device boundary, round trips, compute share.

What crosses a link per graph evaluation (ggml/src/ggml-rpc/ggml-rpc.cpp, llama.cpp's scheduler): the main
device copies each helper's inputs to it (SET_TENSOR, no answer: the hidden state, n_embd x tokens x f32, and
the attention mask and positions), asks it to compute (GRAPH_RECOMPUTE when the graph's shape is the one it
sent last, else GRAPH_COMPUTE with the whole graph: one rpc_tensor of 296 bytes per node and leaf), then
reads its output (GET_TENSOR, which waits for the compute): the next hidden state, or the logits (n_vocab x
f32 per token that needs them) when the helper holds the output layer. The devices take turns: every helper
costs one round trip per ubatch, and its transfers, on top of the compute.

Compute: generation reads every weight once per token, so each device's share of a single device's token
time is its share of the weight bytes; prompt processing is shared the same way.
Measured on loopback (tests/cluster/test_link_speed.py), bytes per token besides the hidden state and mask:
the positions, output ids and the commands themselves; and the graph per layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgepilot.cluster.link import Link
from edgepilot.gguf.arch import ArchParams
from edgepilot.gguf.gguf_records import TensorInfo

F32 = 4
MASK_BYTES = 2  # f16 with flash attention, which llama.cpp picks on CPU ("auto")
KV_PAD = 256  # the KV cache a graph sees grows in steps of 256 cells
TOKEN_OVERHEAD_BYTES = 2500  # measured: inputs and commands besides hidden state and mask, per helper
GRAPH_BYTES_PER_LAYER = 13_500  # measured (SmolLM2): ~45 serialized tensors per layer
ROUND_TRIP_OVERHEAD_S = 0.0004  # measured on loopback: rpc-server's deserializing, two socket hops
UBATCH = 512


@dataclass
class Boundary:
    """One helper's link: what crosses it per generated token and for the prompt."""

    name: str
    n_layers: int
    holds_output: bool
    up_bytes_per_token: int  # main -> helper
    down_bytes_per_token: int  # helper -> main
    graph_bytes: int  # sent when the graph's shape changes: once per prompt, once when generation starts
    compute_share: float  # of a single device's compute time


@dataclass
class SpeedPrediction:
    link: str  # e.g. 10ms,50Mbit
    gen_tps: float
    prompt_tps: float
    n_prompt: int
    round_trips_per_token: int
    bytes_per_token: int  # both directions, all links
    main_compute_share: float
    boundaries: list[Boundary] = field(default_factory=list)
    single_gen_tps: float = 0.0  # the whole model on one device, as given
    single_prompt_tps: float = 0.0


def layer_bytes(layers: dict[int, list[TensorInfo]]) -> dict[int, int]:
    return {il: sum(t.n_bytes or 0 for t in ts) for il, ts in layers.items()}


def _kv_cells(n_used: int, n_ctx: int) -> int:
    return min(n_ctx, (n_used + KV_PAD - 1) // KV_PAD * KV_PAD)


def boundaries(
    arch: ArchParams,
    weights: dict[int, int],
    shares: list[tuple[str, int, int]],
    n_ctx: int,
    n_used: int,
    output_on_main: bool = False,
) -> list[Boundary]:
    """One Boundary per helper with layers; shares: each helper's (name, first layer, end); the output layer
    is n_layer. output_on_main: a tied output's projection runs on the main device (-ot), so the helper
    with the output layer sends back the normed hidden state, not the logits."""
    total = sum(weights.values()) or 1
    mask = _kv_cells(n_used, n_ctx) * MASK_BYTES
    out = []
    for name, first, end in shares:
        if end <= first:
            continue
        holds_output = first <= arch.n_layer < end and not output_on_main
        down = (arch.n_vocab or arch.n_embd) * F32 if holds_output else arch.n_embd * F32
        share = sum(weights.get(il, 0) for il in range(first, end)) / total
        out.append(
            Boundary(
                name,
                end - first,
                holds_output,
                up_bytes_per_token=arch.n_embd * F32 + mask + TOKEN_OVERHEAD_BYTES,
                down_bytes_per_token=down,
                graph_bytes=(end - first) * GRAPH_BYTES_PER_LAYER,
                compute_share=share,
            )
        )
    return out


def predict(
    arch: ArchParams,
    weights: dict[int, int],
    shares: list[tuple[str, int, int]],
    link: Link,
    single_gen_tps: float,
    single_prompt_tps: float,
    n_ctx: int,
    n_prompt: int = 128,
    n_gen: int = 128,
    output_on_main: bool = False,
) -> SpeedPrediction:
    """Generation and prompt t/s of the split: each helper behind its own `link` to the main device."""
    used = min(n_ctx, n_prompt + n_gen // 2)
    bounds = boundaries(arch, weights, shares, n_ctx, used, output_on_main)
    on_link = sum(b.compute_share for b in bounds)

    token_s = 1 / single_gen_tps
    graph_once = 0.0
    for b in bounds:
        up, down = link.transfer_s(b.up_bytes_per_token), link.transfer_s(b.down_bytes_per_token)
        token_s += link.rtt_s + ROUND_TRIP_OVERHEAD_S + up + down
        graph_once += link.transfer_s(b.graph_bytes)
    token_s += graph_once / max(1, n_gen)  # the generation graph, sent once per answer

    n_ub = -(-n_prompt // UBATCH)
    prompt_s = n_prompt / single_prompt_tps
    for b in bounds:
        up_pp = (
            n_prompt * (arch.n_embd * F32 + _kv_cells(n_prompt, n_ctx) * MASK_BYTES) + TOKEN_OVERHEAD_BYTES
        )
        down_pp = b.down_bytes_per_token if b.holds_output else n_prompt * arch.n_embd * F32
        prompt_s += n_ub * (link.rtt_s + ROUND_TRIP_OVERHEAD_S)
        prompt_s += link.transfer_s(up_pp + down_pp + b.graph_bytes)
    return SpeedPrediction(
        link=link.label,
        gen_tps=1 / token_s,
        prompt_tps=n_prompt / prompt_s,
        n_prompt=n_prompt,
        round_trips_per_token=len(bounds),
        bytes_per_token=sum(b.up_bytes_per_token + b.down_bytes_per_token for b in bounds),
        main_compute_share=max(0.0, 1 - on_link),
        boundaries=bounds,
        single_gen_tps=single_gen_tps,
        single_prompt_tps=single_prompt_tps,
    )
