"""Predict the memory of an `edgepilot run` process: llama.cpp's reserved buffers and the peak resident set.

reserved_bytes = weights buffer + CPU_REPACK + KV + compute + output: the sum of the buffers llama.cpp logs.
peak_rss_bytes = what lmkd / the OOM killer see when the prompt has filled the context:
    runtime (interpreter, libraries, llama.cpp's vocabulary and graph structures)
  + resident weights (mapped pages with mmap — repacked tensors included, their pages are read to make the
    copy — or the anonymous copy without mmap)
  + the CPU_REPACK copy
  + the KV cache (llama.cpp clears it at creation: every page is touched)
  + the part of the compute buffer a run touches (compute.py) + the output buffer.
The runtime terms are calibrated against measured runs (benchmarks/memory_accuracy.py, data in
benchmarks/data/memory_runs.json) of llama-cpp-python 0.3.36.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgepilot.model.arch import ArchParams
from edgepilot.model.gguf_records import GGUFHeader
from edgepilot.model.kv_cache import KVCacheSize, kv_cache_bytes
from edgepilot.plan.compute import ComputeEstimate, compute_buffer
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.types import MemoryBreakdown
from edgepilot.plan.weights import WeightsEstimate, estimate_weights

MIB = 1 << 20
# The process before the model's own buffers: Python + llama_cpp + edgepilot imported, the ggml/llama runtime
# (threadpool, graph and tensor metadata, allocator slack). Calibrated: see the module docstring.
RUNTIME_BASE_BYTES = 76 * MIB
# llama.cpp's vocabulary structures (token strings, scores, maps), per token of the vocabulary.
VOCAB_BYTES_PER_TOKEN = 155


@dataclass
class Prediction:
    memory: MemoryBreakdown
    kv: KVCacheSize
    compute: ComputeEstimate
    weights: WeightsEstimate


def runtime_bytes(arch: ArchParams) -> int:
    return RUNTIME_BASE_BYTES + VOCAB_BYTES_PER_TOKEN * (arch.n_vocab or 0)


def output_buffer_bytes(arch: ArchParams) -> int:
    """One logits row per sequence is reserved up front (llama_context::output_reserve with n_seq_max = 1)."""
    return (arch.n_vocab or 0) * 4


def predict(
    header: GGUFHeader,
    arch: ArchParams,
    settings: EngineSettings,
    repack_plan: dict[str, tuple[str, int]],
    weights: WeightsEstimate | None = None,
) -> Prediction:
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
    compute = compute_buffer(arch, kv.n_ctx, n_ubatch, settings.flash_attn, kv.cells_full, kv.cells_swa)
    weights = weights or estimate_weights(header.tensors, repack_plan)
    output = output_buffer_bytes(arch)
    runtime = runtime_bytes(arch)
    # llama.cpp's weight buffer: every tensor with mmap (CPU_Mapped), all but the repacked ones without.
    weight_buffer = weights.tensor_bytes if settings.use_mmap else weights.tensor_bytes - weights.repack_bytes
    reserved = weight_buffer + weights.repack_bytes + kv.total_bytes + compute.reserved_bytes + output
    peak = (
        runtime
        + weights.resident_bytes(settings.use_mmap)
        + weights.repack_bytes
        + kv.total_bytes
        + compute.touched_bytes
        + output
    )
    memory = MemoryBreakdown(
        weights_bytes=weights.resident_bytes(settings.use_mmap),
        repack_bytes=weights.repack_bytes,
        kv_bytes=kv.total_bytes,
        compute_reserved_bytes=compute.reserved_bytes,
        output_bytes=output,
        runtime_bytes=runtime,
        peak_rss_bytes=peak,
        reserved_bytes=reserved,
        compute_touched_bytes=compute.touched_bytes,
    )
    return Prediction(memory=memory, kv=kv, compute=compute, weights=weights)
