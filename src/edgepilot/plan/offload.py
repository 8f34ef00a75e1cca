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
The driver's share is not in any log. Until a run on that device says otherwise the planner assumes UMA and
LAVAPIPE's figures below; after an offloaded run of llama.cpp's own programs it uses what that run showed
(tuned/offload_calibration.py: per llama.cpp version, device as llama.cpp describes it, and model), with the
CPU's extra buffer types that run logged (x86 AMX copies of some weights: never on a phone). Measured on
lavapipe, the driver's memory depends on the model (one set of compiled pipelines per weight type on the
device: SmolLM2, two types, ~190 MiB; Gemma 3, four, ~300 MiB), hardly on the layer count (10, 20, all:
within 7 MiB) and on the ubatch only for some models (SmolLM2 +376 MiB past 256, Gemma 3 none at 128, 256,
512): a learned figure is applied per ubatch class, and a ubatch not measured yet assumes the growth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgepilot.device.gpu_llama import backend_of
from edgepilot.gguf.arch import ArchParams
from edgepilot.gguf.ggml_types import is_quantized
from edgepilot.gguf.gguf_records import GGUFHeader, TensorInfo
from edgepilot.gguf.kv_cache import KVCacheSize
from edgepilot.plan.arithmetic import DriverSample, LearnedDevice
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
    base_types: int = 2  # the quantized weight types on the device base_bytes was measured with
    per_type_bytes: int = 0  # more per quantized weight type on the device beyond base_types

    def bytes_for(self, n_ubatch: int, weight_types: int = 1) -> int:
        more_types = self.per_type_bytes * max(0, weight_types - self.base_types)
        return self.base_bytes + more_types + (self.large_ubatch_bytes if n_ubatch > LARGE_UBATCH else 0)


# Measured on lavapipe (Mesa 26.2, LLVM 22) with llama.cpp 0.7.0 and SmolLM2: VmHWM of llama-server minus
# the planner's runtime (the uncalibrated one: what a fresh install plans with) and every buffer it logged:
# 188-193 MiB at 10, 20 and all layers with ubatch 128 or 256 (ctx 256 and 512); 209 at -ngl 0, where op
# offload adds staging of its own; 567 MiB with ubatch 512: lavapipe's heap (its LLVM-compiled pipelines,
# RssAnon) jumps past a ubatch of 256, while the libraries (libLLVM, the ICD, libggml-vulkan: 85-96 MiB of
# file pages) stay. Gemma 3's heap is larger at the same settings, with four quantized weight types on the
# device (Q4_K, Q5_0, Q6_K, Q8_0) where SmolLM2 has two (Q4_1, and Q8_0 in its tied output's copy): 297-304
# MiB at 10 and all layers, ubatch 128, 256 and 512 (no jump there), so ~55 MiB per type. One software
# driver's figures, not a phone's.
LAVAPIPE = DriverCosts(
    "lavapipe (Mesa 26.2) with llama.cpp 0.7.0, measured here with SmolLM2 and Gemma 3",
    base_bytes=int(190.9 * MIB),
    large_ubatch_bytes=376 * MIB,
    max_tensor_bytes=128 * MIB,  # lavapipe's maxStorageBufferRange
    per_type_bytes=55 * MIB,
)
# ggml's OpenCL backend on an Adreno: never measured here (no phone ran it for this project), so the driver's
# own memory is lavapipe's Vulkan figure, as an assumption the first offloaded run replaces
# (tuned/offload_calibration.py); the largest buffer is CL_DEVICE_MAX_MEM_ALLOC_SIZE as the public clinfo
# and ggml_opencl logs of Adreno 7xx/8xx phones report it: 1 GiB (tests/devices/sd8gen3-*, sd8elite-*).
OPENCL_ASSUMED = DriverCosts(
    "lavapipe's Vulkan figures (no OpenCL driver measured on a phone yet)",
    base_bytes=LAVAPIPE.base_bytes,
    large_ubatch_bytes=LAVAPIPE.large_ubatch_bytes,
    max_tensor_bytes=1 << 30,
    per_type_bytes=LAVAPIPE.per_type_bytes,
)


def driver_for(device: str) -> DriverCosts:
    """The assumed driver costs of a llama.cpp device by its backend (`GPUOpenCL`: OpenCL; else Vulkan's)."""
    return OPENCL_ASSUMED if backend_of(device) == "opencl" else LAVAPIPE


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
    weight_types: int = 1  # distinct quantized weight types on the device
    extra_bytes: int = 0  # the CPU's extra buffer types a run of this model logged (x86 AMX copies)
    calibrated: bool = False  # driver_bytes (and extra_bytes) learned from runs on this device
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


def _bound_on_device(header: GGUFHeader, n_layer: int, ngl: int, limit: int | None) -> list[TensorInfo]:
    """The weights the device holds: the last ngl layers' (the output layer first). A tensor the device
    cannot bind stays on the CPU: a tied output's is the input's own token_embd there (Gemma 3's 170 MiB on
    lavapipe; on x86 with AMX, llama.cpp copies it into an AMX buffer instead)."""
    if ngl <= 0:
        return []
    on_device = tensors_by_layer(header, n_layer)
    first = n_layer + 1 - min(ngl, n_layer + 1)
    return [
        t
        for il in range(first, n_layer + 1)
        for t in on_device[il]
        if limit is None or (t.n_bytes or 0) <= limit
    ]


def _weight_types(bound: list[TensorInfo]) -> int:
    return max(1, len({t.ggml_type for t in bound if is_quantized(t.ggml_type)}))


def device_weight_types(
    header: GGUFHeader, n_layer: int, n_gpu_layers: int, limit: int | None = LAVAPIPE.max_tensor_bytes
) -> int:
    """How many quantized weight types the device computes with (each compiles its own pipelines)."""
    return _weight_types(_bound_on_device(header, n_layer, n_gpu_layers, limit))


def plan_offload(
    header: GGUFHeader,
    arch: ArchParams,
    device: str,
    n_gpu_layers: int,
    kv: KVCacheSize,
    n_tokens: int,
    driver: DriverCosts = LAVAPIPE,
    learned: LearnedDevice | None = None,
    runtime_bytes: int = 0,
    engine: str = "llama.cpp",
) -> OffloadEstimate:
    """n_gpu_layers as llama.cpp counts them (n_layer + 1 at most: fit.offloaded_layers resolves `all`);
    kv: the whole cache as the planner sized it; n_tokens: the ubatch; learned: what runs on this device
    showed (tuned/offload_calibration.py), runtime_bytes: the runtime the plan counts beside it."""
    n_layer = arch.n_layer
    ngl = max(0, min(n_gpu_layers, n_layer + 1))
    first = n_layer + 1 - ngl
    bound = _bound_on_device(header, n_layer, ngl, driver.max_tensor_bytes)
    device_weights = sum(_padded(t.n_bytes or 0) for t in bound)
    weight_types = _weight_types(bound)
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
    driver_bytes = driver.bytes_for(n_tokens, weight_types)
    extra, calibrated = 0, False
    if learned is not None and learned.samples:
        driver_bytes, extra, note = learned_driver(
            learned, driver, n_tokens, ngl, weight_types, runtime_bytes
        )
        calibrated = True
        notes.append(f"{device}'s driver memory ({driver_bytes / MIB:.0f} MiB) calibrated: {note} ({engine})")
    else:
        notes.append(
            f"{device}'s driver memory ({driver_bytes / MIB:.0f} MiB) assumed: {driver.source}; the first "
            f"offloaded run of {engine} on {device} calibrates it"
        )
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
        driver_bytes=driver_bytes,
        weight_types=weight_types,
        extra_bytes=extra,
        calibrated=calibrated,
        notes=notes,
    )


def _large(n_ubatch: int) -> bool:
    return n_ubatch > LARGE_UBATCH


def learned_driver(
    learned: LearnedDevice,
    assumed: DriverCosts,
    n_ubatch: int,
    n_gpu_layers: int,
    weight_types: int,
    runtime_bytes: int,
) -> tuple[int, int, str]:
    """The driver's memory and the CPU's extra buffers for these settings from the runs on this device:
    the runs after the device's first (which compiled the driver's pipelines) when there are some, those that
    filled their context first (the others may not have compiled every pipeline), those at -ngl 0 or not as
    planned (op offload alone costs differently), those in the same ubatch class; the largest figure of those.
    The same model: all that was not a buffer, less today's runtime. Another model: its driver figure, plus
    the per-type cost for each weight type more on the device; no extra buffers (they are that model's
    tensors). A ubatch class not measured adds the assumed growth past LARGE_UBATCH."""
    samples = [s for s in learned.samples if not s.cold] or list(learned.samples)
    samples = [s for s in samples if s.filled] or samples
    samples = [s for s in samples if (s.n_gpu_layers == 0) == (n_gpu_layers == 0)] or samples
    same_class = [s for s in samples if _large(s.n_ubatch) == _large(n_ubatch)]
    growth = 0
    if not same_class and _large(n_ubatch):
        growth = assumed.large_ubatch_bytes
    chosen = same_class or samples
    per_type = assumed.per_type_bytes if learned.per_type_bytes is None else learned.per_type_bytes

    def driver_of(s: DriverSample) -> int:
        if learned.same_model:
            return s.driver_bytes + s.runtime_bytes - runtime_bytes
        return s.driver_bytes + per_type * max(0, weight_types - s.weight_types)

    driver = max(0, max(driver_of(s) for s in chosen) + growth)
    extra = max(s.extra_bytes for s in chosen) if learned.same_model else 0
    n = len(learned.samples)
    note = f"measured on {learned.device} ({learned.description}) in {n} run{'s' if n != 1 else ''} of "
    note += "this model" if learned.same_model else "other models, scaled by the weight types on the device"
    if not any(s.filled for s in learned.samples):
        note += "; no context-filling run yet: a long prompt may compile more"
    if growth:
        note += f"; ubatch {n_ubatch} not measured: +{growth / MIB:.0f} MiB assumed past {LARGE_UBATCH}"
    if extra:
        note += f"; with {extra / MIB:.0f} MiB of the CPU's extra buffers (e.g. x86 AMX) its runs logged"
    return driver, extra, note
