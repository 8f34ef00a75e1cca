"""The memory of a run that offloads layers to a GPU (`-dev NAME -ngl N`), per device, as llama.cpp sizes it.

Which layers go where is llama.cpp's assignment (plan/layers.py): the last N of the n_layer + 1 layers, the
output layer first; the input layer (token_embd, read with GET_ROWS) always stays on the CPU. Checked against
llama.cpp 0.7.0's load log (`-lv 4`) on Mesa's lavapipe with both test models at 0, 10, 20 and all layers
(tests/plan/test_offload.py keeps those logs' numbers):
- `Vulkan0 model buffer`: the offloaded layers' tensors, a tied output's copy of token_embd included
  (Gemma 3: 170 MiB more as soon as one layer is offloaded). Weights are copied into driver memory, never
  mapped: no page-cache discount.
- `CPU_Mapped`: token_embd and the layers left on the CPU; with mmap the span of those tensors stays resident
  (llama.cpp unmaps only the file's ends, so a CPU layer at each end keeps the whole file).
- `CPU_REPACK` is gone whatever -ngl says: llama.cpp adds the CPU's extra buffer types only when no GPU
  device is in use (llama-model.cpp make_cpu_buft_list), so CPU layers run on the plain layout.
- KV: each layer's cache on its layer's device.
- compute: the device reserves the graph's worst case (`Vulkan0 compute buffer`); the CPU's inputs and the
  tensors the CPU computes live in pinned host memory (`Vulkan_Host compute buffer`), as do the logits
  (`Vulkan_Host output buffer`). At -ngl 0 the device still reserves its compute buffer (op offload).
What counts in RSS: on a UMA device (every phone GPU; lavapipe, whose device memory is host RAM) every
Vulkan buffer is the process's memory (lavapipe: memfd pages, RssShmem, measured equal to the logged buffers
+ 1-3 MiB), plus the driver itself: its libraries and its heap (lavapipe compiles each pipeline with LLVM).
The driver's share is not in any log: DRIVER_BYTES is what it measured here on lavapipe; a phone's driver
is smaller or larger, and the planner cannot tell yet (no probe fact reaches it): it assumes UMA and this
figure until a run on that device says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgepilot.gguf.arch import ArchParams
from edgepilot.gguf.gguf_records import GGUFHeader, TensorInfo
from edgepilot.gguf.kv_cache import KVCacheSize
from edgepilot.plan.layers import kv_per_layer, layer_of, tensors_by_layer
from edgepilot.plan.weights import WeightsEstimate, estimate_weights

MIB = 1 << 20
F32 = 4
LARGE_UBATCH = 256
DEVICE_ALIGN = 256  # ggml-vulkan aligns each tensor to the device's minStorageBufferOffsetAlignment (<= 256)


@dataclass(frozen=True)
class DriverCosts:
    """What the GPU driver itself adds to the process, beyond the buffers llama.cpp logs (measured)."""

    source: str
    base_bytes: int  # libraries (Vulkan loader, driver, its compiler) and the driver's heap
    large_ubatch_bytes: int = 0  # more driver heap once the ubatch passes LARGE_UBATCH
    max_tensor_bytes: int | None = None  # a larger weight cannot be bound on the device: it stays on the CPU
    uma: bool = True  # device memory is this RAM (integrated GPUs, lavapipe): it counts in RSS

    def bytes_for(self, n_ubatch: int) -> int:
        return self.base_bytes + (self.large_ubatch_bytes if n_ubatch > LARGE_UBATCH else 0)


# Measured on lavapipe (Mesa 26.2, LLVM 22) with llama.cpp 0.7.0 and SmolLM2: VmHWM of llama-server minus
# the planner's runtime (the uncalibrated one: what a fresh install plans with) and every buffer it logged:
# 188-193 MiB at 10, 20 and all layers with ubatch 128 or 256 (ctx 256 and 512); 209 at -ngl 0, where op
# offload adds staging of its own; 567 MiB with ubatch 512: lavapipe's heap (its LLVM-compiled pipelines,
# RssAnon) jumps past a ubatch of 256, while the libraries (libLLVM, the ICD, libggml-vulkan: 85-96 MiB of
# file pages) stay. Gemma 3's heap was larger at the same settings (more quantization types, more
# pipelines): this is one model's figure on a software driver, not a phone's.
LAVAPIPE = DriverCosts(
    "lavapipe (Mesa 26.2) with llama.cpp 0.7.0, measured here with SmolLM2",
    base_bytes=int(190.9 * MIB),
    large_ubatch_bytes=376 * MIB,
    max_tensor_bytes=128 * MIB,  # lavapipe's maxStorageBufferRange
)


@dataclass
class OffloadEstimate:
    device: str
    n_gpu_layers: int
    first_layer: int  # layers [first_layer, n_layer] are on the device (n_layer: the output layer)
    cpu_weights: WeightsEstimate  # token_embd and the layers left on the CPU (never repacked)
    device_weights_bytes: int  # the device's model buffer
    device_kv_bytes: int
    cpu_kv_bytes: int
    device_compute_bytes: int  # the device's compute buffer
    host_compute_bytes: int  # Vulkan_Host compute buffer: the CPU's share of the graph, in pinned memory
    driver: DriverCosts
    driver_bytes: int  # the driver's own memory for these settings
    notes: list[str] = field(default_factory=list)

    @property
    def device_bytes(self) -> int:
        """Everything the device allocates: what fit's `device_bytes{NAME}` shows."""
        return self.device_weights_bytes + self.device_kv_bytes + self.device_compute_bytes

    def cpu_weights_resident(self, use_mmap: bool) -> int:
        return self.cpu_weights.weight_buffer_bytes(use_mmap, False)


def _padded(n: int, align: int = DEVICE_ALIGN) -> int:
    return (n + align - 1) // align * align


def _n_ff(header: GGUFHeader) -> int:
    value = header.metadata.get(f"{header.architecture}.feed_forward_length")
    if isinstance(value, list):
        return max((int(v) for v in value), default=0)
    return int(value) if isinstance(value, int) else 0


def device_compute_bytes(arch: ArchParams, n_ff: int, n_tokens: int) -> int:
    """The device's compute buffer: ggml-vulkan's graph peaks in the feed-forward block (gate, up and the
    activation, n_ff each, plus five n_embd rows per token). Fitted to the logs: SmolLM2 7.38 MiB (ubatch
    256, predicted 7.31) and 15.26 (512: 14.63); Gemma 3 10.01 (256: 9.13)."""
    return n_tokens * (3 * n_ff + 5 * arch.n_embd) * F32


def host_compute_bytes(arch: ArchParams, n_ff: int, n_tokens: int, n_kv: int) -> int:
    """Vulkan_Host compute: per token of the ubatch, the f32 mask row over the KV cells and the CPU's rows
    (SmolLM2: 2.88 MiB at ubatch 256, 6.26 at 512, both exact; Gemma 3: 4.01 at 256, predicted 3.50)."""
    return n_tokens * (n_kv + n_ff + 2 * arch.n_embd) * F32


def plan_offload(
    header: GGUFHeader,
    arch: ArchParams,
    device: str,
    n_gpu_layers: int,
    kv: KVCacheSize,
    n_tokens: int,
    driver: DriverCosts = LAVAPIPE,
) -> OffloadEstimate:
    """n_gpu_layers as llama.cpp counts them (n_layer + 1 at most: fit.offloaded_layers resolves `all`);
    kv: the whole cache as the planner sized it; n_tokens: the ubatch."""
    n_layer = arch.n_layer
    ngl = max(0, min(n_gpu_layers, n_layer + 1))
    first = n_layer + 1 - ngl
    on_device = tensors_by_layer(header, n_layer) if ngl else {}
    limit = driver.max_tensor_bytes
    # a tensor the device cannot bind stays on the CPU: a tied output's is the input's own token_embd there
    # (Gemma 3's 170 MiB on lavapipe; on x86 with AMX, llama.cpp copies it into an AMX buffer instead)
    device_weights = sum(
        _padded(t.n_bytes or 0)
        for il in range(first, n_layer + 1)
        for t in on_device[il]
        if limit is None or (t.n_bytes or 0) <= limit
    )
    kept: list[TensorInfo] = []
    for t in header.tensors:
        il = layer_of(t.name, n_layer)
        if il is None or il < first:
            kept.append(t)
    cpu_weights = estimate_weights(kept, {}, header.architecture, file_size=header.file_size)
    per_layer = kv_per_layer(arch, kv.n_ctx, kv.type_k, kv.type_v, kv)
    device_kv = sum(per_layer[il] for il in range(first, n_layer + 1))
    n_kv = kv.cells_full or kv.cells_swa
    n_ff = _n_ff(header)
    notes = [
        f"{ngl} of {n_layer + 1} layers on {device}: its memory counted as RAM (assumed UMA, as on every "
        "phone GPU); no CPU_REPACK copies while a GPU is in use"
    ]
    return OffloadEstimate(
        device=device,
        n_gpu_layers=ngl,
        first_layer=first,
        cpu_weights=cpu_weights,
        device_weights_bytes=device_weights,
        device_kv_bytes=device_kv,
        cpu_kv_bytes=kv.total_bytes - device_kv,
        device_compute_bytes=device_compute_bytes(arch, n_ff, n_tokens),
        host_compute_bytes=host_compute_bytes(arch, n_ff, n_tokens, n_kv),
        driver=driver,
        driver_bytes=driver.bytes_for(n_tokens),
        notes=notes,
    )
