r"""Which device holds which layer when llama.cpp splits a model over RPC helpers, and what each allocates.

llama.cpp (src/llama-model.cpp, load_tensors): the input layer (token_embd) stays on the main device's CPU;
with `-ngl N` the layers below i_gpu_start = n_layer+1-N stay there too; the rest, the output layer (index
n_layer) included, go to the RPC devices in --rpc order: layer il goes to the first device j with
split_j > (il - i_gpu_start) / N, split_j being the running sum of --tensor-split normalized to 1 (float32).
So the output layer is offloaded whenever any layer is. A tied output (no output.weight) is token_embd
created a second time (TENSOR_DUPLICATED) in the output layer's buffer type: on a helper, a copy of it.
`-ot token_embd\.weight=CPU` (--override-tensor, matched by name) puts that duplicate in a CPU buffer type
instead; when it is the input's own (the type does not repack) the loader returns the input tensor itself,
so the main device computes the logits from the embedding it maps anyway, and output_norm alone stays with
the output layer on the last helper (llama-model-loader.cpp create_tensor). Each layer's KV cache lives on
the layer's device (offload_kqv).

What an rpc-server holds (ggml/src/ggml-rpc/ggml-rpc.cpp): its buffers are plain ggml CPU buffers, malloc'd,
so pages count only once written: the weights it is sent, the KV cache (cleared at creation, so written),
and the part of the compute buffer a graph touches. While loading, each tensor arrives as one message that
the server receives whole into a std::vector before copying it into the buffer: for a moment it is held
twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from edgepilot.gguf.arch import ArchParams
from edgepilot.gguf.gguf_records import GGUFHeader, TensorInfo
from edgepilot.gguf.kv_cache import kv_cache_bytes

MIB = 1 << 20
# Measured on x86-64 (VmHWM of the rpc-server built from the engine's commit, -t 1): the idle server, and
# what generating with short prompts touches of its compute buffer (graph nodes, activations of a few tokens).
RPC_BASE_BYTES = int(5.4 * MIB)
RPC_GRAPH_BYTES = int(2.3 * MIB)
_BLOCK = re.compile(r"^blk\.(\d+)\.")
TOKEN_EMBD = "token_embd.weight"
# llama.cpp's --override-tensor that keeps a tied output on the main device (see the module's docstring)
OUTPUT_ON_MAIN = r"token_embd\.weight=CPU"
OUTPUT_TENSORS = ("output.weight", "output_norm.weight", "output_norm.bias", "output.bias")


@dataclass
class DeviceShare:
    """One device's part: layers [first, last) (the output layer is index n_layer)."""

    name: str  # "main" or host:port
    first_layer: int
    end_layer: int
    weights_bytes: int
    kv_bytes: int
    load_peak_bytes: int  # the most it holds while loading (a tensor in flight counted twice)
    predicted_peak_bytes: int
    budget_bytes: int | None = None

    @property
    def n_layers(self) -> int:
        return self.end_layer - self.first_layer

    @property
    def fits(self) -> bool:
        return self.budget_bytes is None or self.predicted_peak_bytes <= self.budget_bytes


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


def _padded(n: int, align: int = 64) -> int:
    return (n + align - 1) // align * align


def kv_per_layer(arch: ArchParams, n_ctx: int, type_k: str, type_v: str) -> dict[int, int]:
    """KV bytes per layer, as llama.cpp sizes them (full-attention and sliding-window layers separately)."""
    kv = kv_cache_bytes(arch, n_ctx, type_k, type_v, swa_full=False)
    layers = arch.attention_layers()
    out = dict.fromkeys(range(arch.n_layer + 1), 0)
    for swa, total in ((False, kv.full_bytes), (True, kv.swa_bytes)):
        group = [il for il in layers if arch.is_swa[il] == swa]
        widths = {il: arch.n_embd_k_gqa(il) + arch.n_embd_v_gqa(il) for il in group}
        whole = sum(widths.values())
        for il in group:
            out[il] = total * widths[il] // whole if whole else 0
    return out


def llama_split(counts: list[int]) -> list[float]:
    """--tensor-split values that give each RPC device exactly `counts` layers: boundaries sit half a layer
    before each cumulative count, so llama.cpp's float comparison cannot round a layer across. A device with
    no layers gets 0 (a boundary at 0 comes before layer 0: llama.cpp takes the first share above it)."""
    bounds, running = [], 0
    for c in counts[:-1]:
        running += c
        bounds.append(max(running - 0.5, 0.0))
    bounds.append(float(sum(counts)))
    return [b - a for a, b in zip([0.0, *bounds[:-1]], bounds, strict=True)]


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


def helper_share(
    name: str,
    first: int,
    end: int,
    layers: dict[int, list[TensorInfo]],
    kv: dict[int, int],
    budget: int | None,
) -> DeviceShare:
    weights, peak = 0, 0
    # llama.cpp creates (and loads) the output layer's tensors before the blocks' (llama-model.cpp)
    order = sorted(range(first, end), key=lambda il: (il != len(layers) - 1, il))
    for t in (t for il in order for t in layers[il]):
        size = _padded(t.n_bytes or 0)
        peak = max(peak, weights + 2 * size)  # the message and its copy in the buffer
        weights += size
    kv_bytes = sum(kv[il] for il in range(first, end))
    steady = weights + kv_bytes + RPC_GRAPH_BYTES
    return DeviceShare(
        name=name,
        first_layer=first,
        end_layer=end,
        weights_bytes=weights,
        kv_bytes=kv_bytes,
        load_peak_bytes=RPC_BASE_BYTES + peak,
        predicted_peak_bytes=RPC_BASE_BYTES + max(peak, steady),
        budget_bytes=budget,
    )
