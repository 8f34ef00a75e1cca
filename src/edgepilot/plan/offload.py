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
+ 1-3 MiB), plus the driver itself: its libraries, its heap and the pipelines it compiled. The driver's share
is not in any log. Until a run on that device says otherwise the planner assumes what the device's facts
imply (plan/driver_prior.py: its type and heaps, the driver's libraries, a first run that compiles every
pipeline); after an offloaded run of llama.cpp's own programs it uses what that run showed
(tuned/offload_calibration.py: per llama.cpp version, device as llama.cpp describes it, and model), with the
CPU's extra buffer types that run logged (x86 AMX copies of some weights: never on a phone). Measured on
lavapipe, the driver's memory depends on the model (one set of compiled pipelines per weight type on the
device), hardly on the layer count (10, 20, all: within 7 MiB), and on whether the driver's cache held the
pipelines: a model's first run compiles them (SmolLM2 at ubatch 512: 771 MiB peak on an empty
mesa_shader_cache, 353 the next run), later runs load them. A ubatch not run before may compile a few more
(larger matrix tiles): the plan follows the runs of the same ubatch class when there are some.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
# The Vulkan specification's minimum maxStorageBufferRange (2^27): every device binds a tensor this large; the
# plan of a device whose own limit is not known keeps larger ones on the CPU, as llama.cpp does on lavapipe.
SPEC_MIN_STORAGE_RANGE = 128 * MIB


@dataclass(frozen=True)
class DriverCosts:
    """What the GPU driver itself adds to the process, beyond the buffers llama.cpp logs (measured)."""

    source: str
    base_bytes: int  # libraries (Vulkan loader, driver, its compiler) and the driver's heap
    max_tensor_bytes: int | None = SPEC_MIN_STORAGE_RANGE  # a larger weight stays on the CPU
    uma: bool = True  # device memory is this RAM (integrated GPUs, lavapipe): it counts in RSS
    base_types: int = 2  # the quantized weight types on the device base_bytes was measured with
    per_type_bytes: int = 0  # more per quantized weight type on the device beyond base_types

    def bytes_for(self, weight_types: int = 1) -> int:
        return self.base_bytes + self.per_type_bytes * max(0, weight_types - self.base_types)


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
    header: GGUFHeader, n_layer: int, n_gpu_layers: int, limit: int | None = SPEC_MIN_STORAGE_RANGE
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
    driver: DriverCosts,
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
    where = "its memory counted as RAM (UMA)" if driver.uma else "its memory is its own (not counted as RAM)"
    notes = [f"{ngl} of {n_layer + 1} layers on {device}: {where}; no CPU_REPACK copies while a GPU is used"]
    driver_bytes = driver.bytes_for(weight_types)
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
    the runs after the model's first (which compiled the driver's pipelines) when there are some, those that
    filled their context first (the others may not have compiled every pipeline), those at -ngl 0 or not as
    planned (op offload alone costs differently), those in the same ubatch class; the largest figure of those.
    The same model: all that was not a buffer, less today's runtime. Another model: its driver figure, plus
    the per-type cost for each weight type more on the device; no extra buffers (they are that model's
    tensors)."""
    samples = [s for s in learned.samples if not s.cold] or list(learned.samples)
    samples = [s for s in samples if s.filled] or samples
    samples = [s for s in samples if (s.n_gpu_layers == 0) == (n_gpu_layers == 0)] or samples
    chosen = [s for s in samples if _large(s.n_ubatch) == _large(n_ubatch)] or samples
    per_type = assumed.per_type_bytes if learned.per_type_bytes is None else learned.per_type_bytes

    def driver_of(s: DriverSample) -> int:
        if learned.same_model:
            return s.driver_bytes + s.runtime_bytes - runtime_bytes
        return s.driver_bytes + per_type * max(0, weight_types - s.weight_types)

    driver = max(0, max(driver_of(s) for s in chosen))
    extra = max(s.extra_bytes for s in chosen) if learned.same_model else 0
    n = len(learned.samples)
    note = f"measured on {learned.device} ({learned.description}) in {n} run{'s' if n != 1 else ''} of "
    note += "this model" if learned.same_model else "other models, scaled by the weight types on the device"
    if not any(s.filled for s in learned.samples):
        note += "; no context-filling run yet: a long prompt may compile more"
    if extra:
        note += f"; with {extra / MIB:.0f} MiB of the CPU's extra buffers (e.g. x86 AMX) its runs logged"
    return driver, extra, note
