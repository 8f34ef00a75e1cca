"""The generation speed ceiling: every token reads (about) all the weights once, plus the KV cache of the
context so far, so t/s <= memory read bandwidth / bytes read per token.

The bandwidth is this device's measured read bandwidth (device/bandwidth.py, kept per device by
tuned/bandwidth_cache.py). A share near 1 means the memory is the limit and more tuning cannot help; well
below 1 means threads, cores or per-token overhead are.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.device.bandwidth import Bandwidth
from edgepilot.errors import UserError

if TYPE_CHECKING:
    from edgepilot.plan.settings import EngineSettings

__all__ = [
    "Bandwidth",
    "bytes_per_token",
    "generation_share",
    "kv_bytes_per_cell",
    "roofline_fraction",
    "share_words",
]

MEMORY_BOUND = 0.8  # at or above: the memory is the limit
FAR = 0.5  # below: something else is


def bytes_per_token(model_path: Path) -> int | None:
    """Weight bytes one generated token reads: every tensor, except the token embedding table when the model
    has a separate output matrix (then only one embedding row is read per token)."""
    from edgepilot.gguf.verdict import header_of

    try:
        header = header_of(model_path)
    except (UserError, OSError):
        return None
    sizes = {t.name: t.n_bytes for t in header.tensors}
    if not sizes or any(v is None for v in sizes.values()):
        return None
    total = sum(sizes.values())
    if "output.weight" in sizes and "token_embd.weight" in sizes:
        total -= sizes["token_embd.weight"]
    return total


def kv_bytes_per_cell(model_path: Path, type_k: str = "f16", type_v: str = "f16") -> int | None:
    """KV cache bytes one token of context adds to what each generated token reads (K and V of every
    attention layer; llama.cpp's graph reads the used cells of sliding-window layers too)."""
    from edgepilot.gguf.arch import arch_params
    from edgepilot.gguf.kv_cache import kv_cache_bytes
    from edgepilot.gguf.verdict import header_of

    cells = 256
    try:
        arch = arch_params(header_of(model_path).metadata)
        kv = kv_cache_bytes(arch, cells, type_k, type_v, flash_attn=True)
    except (UserError, OSError, ValueError):
        return None
    return (kv.full_bytes + kv.swa_bytes) // (cells * kv.n_stream)


def read_per_token(weights: int | None, kv_cell: int | None, mean_cells: float) -> int | None:
    """Bytes a generated token reads when the context holds `mean_cells` tokens on average."""
    if not weights:
        return None
    return weights + round((kv_cell or 0) * max(0.0, mean_cells))


def roofline_fraction(tg_ts: float, bytes_token: int | None, bandwidth: Bandwidth | None) -> float | None:
    if not bytes_token or bandwidth is None or bandwidth.bytes_per_s <= 0 or tg_ts <= 0:
        return None
    return round(tg_ts * bytes_token / bandwidth.bytes_per_s, 3)


def generation_share(
    model: Path,
    settings: EngineSettings,
    n_prompt: int,
    n_gen: int,
    gen_tps: float,
    bandwidth: Bandwidth | None,
) -> float | None:
    """A run's generation as a share of the limit: its t/s x (weights + the KV cache of its context, on
    average the prompt and half the reply) / bandwidth."""
    if bandwidth is None or not n_gen:
        return None
    kv = kv_bytes_per_cell(model, settings.type_k, settings.type_v)
    read = read_per_token(bytes_per_token(model), kv, n_prompt + n_gen / 2)
    return roofline_fraction(gen_tps, read, bandwidth)


def share_words(fraction: float, tuned: bool = False) -> str:
    """What a share of the bandwidth limit says, for people. tuned: said of tune's own pick, which has no
    `edgepilot tune` left to suggest."""
    if fraction >= MEMORY_BOUND:
        return "memory-bound: more tuning cannot help much"
    if tuned:
        if fraction < FAR:
            return "far from the limit even tuned: per-token overhead or a busy CPU holds it back"
        return "some headroom left"
    if fraction < FAR:
        return "far from the limit: look at threads and cores (edgepilot tune)"
    return "some headroom: edgepilot tune may find it"
