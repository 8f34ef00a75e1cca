"""Predict the memory of an `edgepilot run` process: llama.cpp's reserved buffers and the peak resident set.

reserved_bytes = weights buffer + CPU_REPACK + KV + compute + output: the sum of the buffers llama.cpp logs.
peak_rss_bytes = what lmkd / the OOM killer see, the larger of two moments:
  running, when the prompt has filled the context:
    runtime (interpreter, libraries, llama.cpp's vocabulary and graph structures)
  + resident weights (the mapped span of the plain tensors with mmap, the anonymous buffer without)
  + the CPU_REPACK copy (when repacking is on)
  + the KV cache (llama.cpp clears it at creation: every page is touched)
  + the part of the compute buffer a run touches and the CPU backend's work buffer (compute.py)
  + the output buffer;
  loading: runtime + the weights at their worst moment (weights.py: with mmap the whole file is populated
    while the repacked copies are written; without, each repacked tensor passes through a read buffer).
An offloaded run (a device named, plan/offload.py) keeps the CPU's part of these terms (no CPU_REPACK:
llama.cpp drops it while a GPU is in use) and adds, on a UMA device, every buffer the device holds, the pinned
host buffers and the driver's own memory (learned from runs on that device when there were some: the
arithmetic's `offload`), plus the CPU's extra buffer types those runs logged; its memory.device_bytes names
the device's share.
The runtime terms are calibrated against measured runs (benchmarks/memory_accuracy.py, data in
benchmarks/data/memory_runs.json) of llama-cpp-python 0.3.36; the weight terms against llama.cpp's logs on
aarch64 (benchmarks/arm_memory.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from edgepilot.gguf.arch import ArchParams
from edgepilot.gguf.gguf_records import GGUFHeader
from edgepilot.gguf.kv_cache import KVCacheSize, kv_cache_bytes
from edgepilot.plan.arithmetic import EngineArithmetic
from edgepilot.plan.compute import ComputeEstimate, compute_buffer
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.types import MemoryBreakdown
from edgepilot.plan.weights import WeightsEstimate, estimate_weights

if TYPE_CHECKING:  # the offload's modules load only for a plan that offloads
    from edgepilot.plan.offload import DriverCosts, OffloadEstimate

MIB = 1 << 20
# The process before the model's own buffers: Python + llama_cpp + edgepilot imported, the ggml/llama runtime
# (threadpool, graph and tensor metadata, allocator slack). Calibrated: see the module docstring.
# Lowered by 15 MiB from the first calibration (76) when the CLI moved from typer + pydantic to click and
# lazy imports: `import llama_cpp, edgepilot.cli` now peaks at 41.4-41.9 MiB (was 57.2), and `edgepilot run`
# with a context-filling prompt at 15.3 MiB less than memory_runs.json for SmolLM2 Q4_1 at ctx 512 (191.9
# vs 204.3 MiB; ctx 1024: 217.4) and for every quantization of it `edgepilot compare` measured.
# Raised by 4 MiB when run gained the engine choice (and the binding's library lookup): `edgepilot compare` on
# SmolLM2's F16, Q8_0, Q4_K_M, Q4_0 and Q2_K measured 4.1-4.5 MiB above the 61 MiB prediction on every row.
RUNTIME_BASE_BYTES = 65 * MIB
# Of that, the interpreter with llama_cpp and edgepilot imported (libraries loaded, no model): what a C++ tool
# such as llama-completion does not carry. Measured: `python -c "import llama_cpp, edgepilot.cli"` peaks at
# 57.2 MiB with typer + pydantic, 41.9 MiB with click (x86-64, llama-cpp-python 0.3.36); run's own Python
# side (engine choice, monitors) adds the 4 MiB RUNTIME_BASE_BYTES gained, so this rose with it.
# benchmarks/arm_memory.py compares llama-completion without it: RUNTIME_BASE_BYTES - INTERPRETER_BYTES stays
# as calibrated there.
INTERPRETER_BYTES = 46 * MIB
# llama.cpp's vocabulary structures (token strings, scores, maps), per token of the vocabulary.
VOCAB_BYTES_PER_TOKEN = 155


@dataclass
class Prediction:
    memory: MemoryBreakdown
    kv: KVCacheSize
    compute: ComputeEstimate
    weights: WeightsEstimate
    offload: OffloadEstimate | None = None


def vocab_bytes(arch: ArchParams) -> int:
    """The model's own share of the runtime: a second model in the process (a draft) carries it again."""
    return VOCAB_BYTES_PER_TOKEN * (arch.n_vocab or 0)


def runtime_bytes(arch: ArchParams) -> int:
    return RUNTIME_BASE_BYTES + vocab_bytes(arch)


def program_arithmetic(arch: ArchParams, program: str = "llama-completion") -> EngineArithmetic:
    """llama.cpp's own program (llama-completion, llama-cli): the pinned figures without the interpreter the
    in-process engine carries."""
    return EngineArithmetic(program, runtime_bytes=runtime_bytes(arch) - INTERPRETER_BYTES)


def output_buffer_bytes(arch: ArchParams) -> int:
    """One logits row per sequence is reserved up front (llama_context::output_reserve with n_seq_max = 1)."""
    return (arch.n_vocab or 0) * 4


def predict(
    header: GGUFHeader,
    arch: ArchParams,
    settings: EngineSettings,
    repack_plan: dict[str, tuple[str, int]],
    weights: WeightsEstimate | None = None,
    arithmetic: EngineArithmetic | None = None,
    driver: DriverCosts | None = None,
) -> Prediction:
    """arithmetic: how the llama.cpp that runs differs from the pinned one (None: it is the pinned one).
    driver: the offload device's assumed driver costs (plan/driver_prior.py; None: from no facts)."""
    a = arithmetic or EngineArithmetic("pinned")
    n_batch = min(settings.n_batch, max(settings.n_ctx, 1))
    n_ubatch = min(settings.n_ubatch, n_batch)
    kv = kv_cache_bytes(
        arch,
        settings.n_ctx,
        settings.type_k,
        settings.type_v,
        n_seq=1,
        swa_full=settings.swa_full,
        n_ubatch=n_ubatch,
        n_batch=n_batch,
        flash_attn=settings.flash_attn,
    )
    compute = compute_buffer(
        arch, kv.n_ctx, n_ubatch, settings.flash_attn, kv.cells_full, kv.cells_swa, a.reserve_one_output,
        settings.type_v,
    )  # fmt: skip
    if compute.reserved_bytes + a.compute_reserved_delta_bytes >= 0:  # else no graph of this shape had it
        compute.reserved_bytes += a.compute_reserved_delta_bytes
    compute.touched_bytes = min(compute.touched_bytes, compute.reserved_bytes)  # a run touches what there is
    weights = weights or estimate_weights(
        header.tensors, repack_plan, header.architecture, file_size=header.file_size
    )
    output = output_buffer_bytes(arch)
    runtime = runtime_bytes(arch) if a.runtime_bytes is None else a.runtime_bytes
    if not settings.on_cpu:
        from edgepilot.plan.driver_prior import driver_for
        from edgepilot.plan.offload import plan_offload

        device = str(settings.device)
        offload = plan_offload(
            header, arch, device, settings.n_gpu_layers, kv, n_ubatch, driver=driver or driver_for(device),
            learned=a.offload.get(device), runtime_bytes=runtime,
            engine=a.engine if a.engine != "pinned" else "llama-server",
        )  # fmt: skip
        memory = _offloaded_memory(settings, offload, kv, output, runtime, a)
        return Prediction(memory=memory, kv=kv, compute=compute, weights=weights, offload=offload)
    mmap, repack = settings.use_mmap, settings.repack
    weight_buffer = weights.weight_buffer_bytes(mmap, repack)  # CPU_Mapped with mmap, CPU without
    repack_buffer = weights.repack_buffer_bytes(repack)
    reserved = weight_buffer + repack_buffer + kv.total_bytes + compute.reserved_bytes + output
    running = (
        runtime
        + weights.resident_bytes(mmap, repack)
        + repack_buffer
        + kv.total_bytes
        + compute.running_bytes
        + output
        + a.running_extra_bytes
    )
    peak = max(running, runtime + weights.load_peak_bytes(mmap, repack))
    memory = MemoryBreakdown(
        weights_bytes=weights.resident_bytes(mmap, repack),
        repack_bytes=repack_buffer,
        kv_bytes=kv.total_bytes,
        compute_reserved_bytes=compute.reserved_bytes,
        output_bytes=output,
        runtime_bytes=runtime,
        peak_rss_bytes=peak,
        reserved_bytes=reserved,
        compute_touched_bytes=compute.touched_bytes,
        compute_work_bytes=compute.work_bytes,
    )
    return Prediction(memory=memory, kv=kv, compute=compute, weights=weights)


def _offloaded_memory(
    settings: EngineSettings,
    o: OffloadEstimate,
    kv: KVCacheSize,
    output: int,
    runtime: int,
    a: EngineArithmetic,
) -> MemoryBreakdown:
    """A run with layers on a device: the CPU's share as in a CPU run (without CPU_REPACK), the pinned host
    buffers (Vulkan_Host compute and output), and on a UMA device the device's buffers and its driver."""
    mmap = settings.use_mmap
    cpu_weights = o.cpu_weights_resident(mmap)
    device = o.device_bytes + o.driver_bytes if o.driver.uma else 0
    running = (
        runtime
        + cpu_weights
        + o.cpu_kv_bytes
        + o.host_compute_bytes
        + output
        + device
        + o.extra_bytes
        + a.running_extra_bytes
    )
    # loading: with mmap the whole file is populated while the device's copies are written
    file_pages = max(o.cpu_weights.file_bytes, o.cpu_weights.span_bytes) if mmap else cpu_weights
    loading = runtime + file_pages + o.extra_bytes + (o.device_weights_bytes if o.driver.uma else 0)
    compute = o.device_compute_bytes + o.host_compute_bytes
    return MemoryBreakdown(
        weights_bytes=cpu_weights,
        repack_bytes=0,
        kv_bytes=kv.total_bytes,
        compute_reserved_bytes=compute,
        output_bytes=output,
        runtime_bytes=runtime,
        peak_rss_bytes=max(running, loading),
        reserved_bytes=o.cpu_weights.weight_buffer_bytes(mmap, False)
        + kv.total_bytes
        + compute
        + output
        + o.device_weights_bytes
        + o.extra_bytes,
        compute_touched_bytes=compute,
        device_bytes={o.device: o.device_bytes},
        driver_bytes=o.driver_bytes,
    )
