r"""Which layer each tensor belongs to and which device llama.cpp gives each layer (`-ngl`, --tensor-split).

llama.cpp (src/llama-model.cpp, load_tensors): the input layer (token_embd) stays on the CPU; with `-ngl N`
the layers below i_gpu_start = n_layer+1-N stay there too; the rest, the output layer (index n_layer)
included, go to the offload devices in order: layer il goes to the first device j with
split_j > (il - i_gpu_start) / N, split_j being the running sum of --tensor-split normalized to 1 (float32).
So the output layer is offloaded whenever any layer is. A tied output (no output.weight) is token_embd
created a second time (TENSOR_DUPLICATED) in the output layer's buffer type: on a device, a copy of it.
Each layer's KV cache lives on the layer's device (offload_kqv).
Shared by a GPU offload (plan/offload.py: one device) and an RPC split (cluster/: one device per helper).
"""

from __future__ import annotations

import re

from edgepilot.gguf.arch import ArchParams
from edgepilot.gguf.gguf_records import GGUFHeader, TensorInfo
from edgepilot.gguf.kv_cache import KVCacheSize, kv_cache_bytes

_BLOCK = re.compile(r"^blk\.(\d+)\.")
TOKEN_EMBD = "token_embd.weight"
OUTPUT_TENSORS = ("output.weight", "output_norm.weight", "output_norm.bias", "output.bias")


def layer_of(name: str, n_layer: int) -> int | None:
    """The llama.cpp layer a tensor belongs to: blk.N -> N, output -> n_layer, input (token_embd) -> None."""
    m = _BLOCK.match(name)
    if m:
        return int(m.group(1))
    if name in OUTPUT_TENSORS:
        return n_layer
    return None


def tied_output(header: GGUFHeader) -> bool:
    """The output projection is token_embd itself (Gemma, SmolLM2, Llama 3.2 1B/3B, small Qwen2.5)."""
    names = {t.name for t in header.tensors}
    return TOKEN_EMBD in names and "output.weight" not in names


def tensors_by_layer(
    header: GGUFHeader, n_layer: int, output_on_main: bool = False
) -> dict[int, list[TensorInfo]]:
    r"""Tensors per layer in file order (the order llama.cpp loads them), the tied output included unless
    output_on_main (-ot token_embd\.weight=CPU: the main device uses its own token_embd)."""
    out: dict[int, list[TensorInfo]] = {il: [] for il in range(n_layer + 1)}
    tied = tied_output(header) and not output_on_main
    for t in header.tensors:
        il = layer_of(t.name, n_layer)
        if il is not None:
            out[il].append(t)
        elif t.name == TOKEN_EMBD and tied:
            out[n_layer].append(t)  # the output layer's copy of the tied embedding, loaded when it is read
    return out


def kv_per_layer(
    arch: ArchParams, n_ctx: int, type_k: str, type_v: str, kv: KVCacheSize | None = None
) -> dict[int, int]:
    """KV bytes per layer, as llama.cpp sizes them (full-attention and sliding-window layers separately).
    kv: the whole cache as already sized for other settings (ubatch, a full SWA cache), split the same way."""
    kv = kv or kv_cache_bytes(arch, n_ctx, type_k, type_v, swa_full=False)
    layers = arch.attention_layers()
    out = dict.fromkeys(range(arch.n_layer + 1), 0)
    for swa, total in ((False, kv.full_bytes), (True, kv.swa_bytes)):
        group = [il for il in layers if arch.is_swa[il] == swa]
        widths = {il: arch.n_embd_k_gqa(il) + arch.n_embd_v_gqa(il) for il in group}
        whole = sum(widths.values())
        for il in group:
            out[il] = total * widths[il] // whole if whole else 0
    return out


def assign(split: list[float], n_layer: int, n_gpu_layers: int | None = None) -> list[int]:
    """llama.cpp's mapping for layers 0..n_layer (output included): -1 for the main device's CPU, else the
    RPC device's index. n_gpu_layers: -ngl (None: all of them)."""
    ngl = n_layer + 1 if n_gpu_layers is None else n_gpu_layers
    start = max(n_layer + 1 - ngl, 0)
    act = min(ngl, n_layer + 1)
    total = sum(split)
    cums, running = [], 0.0
    for s in split:
        running += s
        cums.append(running / total)
    out = []
    for il in range(n_layer + 1):
        if il < start or il - start >= act:
            out.append(-1)
            continue
        x = (il - start) / act
        out.append(next((j for j, c in enumerate(cums) if c > x), len(cums) - 1))
    return out
