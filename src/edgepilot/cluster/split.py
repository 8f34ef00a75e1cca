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

from dataclasses import dataclass

from edgepilot.gguf.gguf_records import TensorInfo

# the layer assignment lives with the planner (a GPU offload uses it too); imported here for cluster/
from edgepilot.plan.layers import (  # noqa: F401
    OUTPUT_TENSORS,
    TOKEN_EMBD,
    assign,
    kv_per_layer,
    layer_of,
    tensors_by_layer,
    tied_output,
)

MIB = 1 << 20
# Measured on x86-64 (VmHWM of the rpc-server built from the engine's commit, -t 1): the idle server, and
# what generating with short prompts touches of its compute buffer (graph nodes, activations of a few tokens).
RPC_BASE_BYTES = int(5.4 * MIB)
RPC_GRAPH_BYTES = int(2.3 * MIB)
# llama.cpp's --override-tensor that keeps a tied output on the main device (see the module's docstring)
OUTPUT_ON_MAIN = r"token_embd\.weight=CPU"


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


def _padded(n: int, align: int = 64) -> int:
    return (n + align - 1) // align * align


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
