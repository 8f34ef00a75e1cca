"""`edgepilot fit`: the settings that keep a model inside this device's memory budget, and why."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from edgepilot.errors import UserError
from edgepilot.gguf.arch import ArchParams
from edgepilot.plan.alternatives import find_alternatives
from edgepilot.plan.arithmetic import EngineArithmetic
from edgepilot.plan.budget import compute_budget
from edgepilot.plan.commands import edgepilot_command, llama_cpp_command
from edgepilot.plan.context_limits import context_warnings
from edgepilot.plan.opencl_plan import opencl_advice, read_devices
from edgepilot.plan.planner import (
    CTX_STEP,
    DEFAULT_UBATCH,
    THREADS_PER_CPU,
    DeviceFacts,
    Planner,
    check_thread_count,
    load_model_facts,
    read_device,
)
from edgepilot.plan.requested import ALL_LAYERS, RequestedSettings
from edgepilot.plan.search import SearchResult, search
from edgepilot.plan.settings import CPU_DEVICE, UNQUANTIZED_KV, EngineSettings
from edgepilot.plan.types import FitResult

__all__ = ["CTX_STEP", "DEFAULT_UBATCH", "THREADS_PER_CPU", "DeviceFacts", "Planner", "fit_model"]
__all__ += ["load_model_facts", "read_device", "trade_offs"]


def trade_offs(found: SearchResult, peak: int) -> list[str]:
    """What was given up to fit, each with its cost, and what it saved."""
    if not found.trades:
        return []
    lines = [f"{t.flag}: {t.why}" for t in found.trades]
    if found.peak_untraded is not None and found.peak_untraded > peak:
        lines.append(
            f"without {', '.join(t.flag for t in found.trades)} the same context would peak at "
            f"{found.peak_untraded / 2**20:.0f} MiB instead of {peak / 2**20:.0f} MiB"
        )
    return lines


def offloaded_layers(req: RequestedSettings, n_layer: int) -> int:
    """--gpu-layers as llama.cpp counts them: every repeating layer plus the output (n_layer + 1) at most;
    all of them on a named device when not given, none on the CPU."""
    on_cpu = req.device in (None, CPU_DEVICE)
    if req.n_gpu_layers is None:
        return 0 if on_cpu else n_layer + 1
    if on_cpu and req.n_gpu_layers != 0:
        shown = "all" if req.n_gpu_layers == ALL_LAYERS else req.n_gpu_layers
        raise UserError(
            f"--gpu-layers {shown} needs a GPU: add --device NAME (`edgepilot probe` lists llama.cpp's "
            "devices)"
        )
    if req.n_gpu_layers == ALL_LAYERS:
        return n_layer + 1
    return min(req.n_gpu_layers, n_layer + 1)


def fit_model(
    model: str | os.PathLike[str],
    requested: RequestedSettings | None = None,
    budget_bytes: int | None = None,
    root: Path | str = "/",
    ctx_target: int | None = None,
    reserve_bytes: int = 0,
    arithmetic: EngineArithmetic | Callable[[ArchParams], EngineArithmetic | None] | None = None,
    own_process: bool | None = None,
    opencl: bool = False,
) -> FitResult:
    """The memory planner: settings for `model` on the device at `root` (tools call it through the settings
    decision, edgepilot.tuned.decide, which adds the run's context target and the tuned profile).

    Settings the user gave are kept. Without a context, the largest one that fits is chosen, capped at
    `ctx_target` when given. reserve_bytes: see Planner. arithmetic: the running llama.cpp's differences from
    the pinned one, or a function of the model's architecture that gives them. own_process: the run's
    process is this one or replaces it (its memory is the run's: plan/budget.py); None: when the engine is
    the in-process one (llama.cpp's own programs run beside this process). opencl: also plan the device's
    OpenCL GPU path (`fit`: plan.opencl_plan; it may run clinfo, so run and serve leave it out).
    """
    req = requested or RequestedSettings()
    path, header, arch = load_model_facts(model)
    if callable(arithmetic):
        arithmetic = arithmetic(arch)
    device = read_device(root, req.device)
    if own_process is None:
        own_process = arithmetic is None
    budget = compute_budget(device.memory, device.android, budget_bytes, own_process)
    planner = Planner(header, arch, device, reserve_bytes, arithmetic)

    type_k = (req.type_k or req.type_v or "f16").lower()
    type_v = (req.type_v or req.type_k or "f16").lower()
    flash = req.flash_attn if req.flash_attn is not None else type_v not in UNQUANTIZED_KV
    n_ctx_train = arch.n_ctx_train or 4096
    settings = EngineSettings(
        n_ctx=req.n_ctx if req.n_ctx is not None else min(ctx_target or n_ctx_train, n_ctx_train),
        n_batch=req.n_batch if req.n_batch is not None else 512,
        n_ubatch=req.n_ubatch if req.n_ubatch is not None else DEFAULT_UBATCH,
        type_k=type_k,
        type_v=type_v,
        flash_attn=flash,
        use_mmap=True if req.use_mmap is None else req.use_mmap,
        n_threads=req.n_threads if req.n_threads is not None else device.default_threads(),
        n_threads_batch=req.n_threads_batch,
        repack=True if req.repack is None else req.repack,
        device=req.device or CPU_DEVICE,
        n_gpu_layers=offloaded_layers(req, arch.n_layer),
    )
    settings.validate()
    cpus = device.cpu.cores or device.allowed_cpus or 1
    check_thread_count(settings.n_threads, cpus)
    limit = budget.budget_bytes
    found = search(planner, settings, req, limit)
    settings, max_ctx = found.settings, found.max_ctx
    prediction = planner.predict(settings)
    fits = found.fits and prediction.memory.peak_rss_bytes <= limit
    warnings = context_warnings(
        header.metadata, header.architecture or "", arch.n_ctx_train, settings.n_ctx, req.n_ctx is not None
    )
    notes = warnings + list(budget.reasons)
    if device.memory.total_bytes and budget_bytes is None and settings.on_cpu:
        notes.append(
            f"llama.cpp's --fit would count all {device.memory.total_bytes / 2**30:.1f} GiB of RAM as free "
            "on this CPU-only device"
        )
    notes += prediction.kv.notes + arch.notes + (arithmetic.notes if arithmetic else [])
    notes += prediction.offload.notes if prediction.offload else []
    shortfall = 0
    if not fits and max_ctx == 0:
        shortfall = max(0, planner.peak(replace(settings, n_ctx=CTX_STEP)) - limit)
    advice = None
    if opencl:
        cl_devices = read_devices(root, device.android is not None, req.device)
        if cl_devices:
            from edgepilot.gguf.gguf_info import file_type_name  # and its quantization tables: for a GPU only

            source_type = file_type_name(header.metadata.get("general.file_type"))
            advice = opencl_advice(cl_devices, header, path, source_type, planner, settings, limit)
    return FitResult(
        model=str(path),
        fits=fits,
        budget_bytes=limit,
        settings=settings,
        memory=prediction.memory,
        max_ctx=max_ctx,
        n_ctx_train=arch.n_ctx_train or None,
        llama_cpp_args=llama_cpp_command(path, settings),
        edgepilot_args=edgepilot_command(path, settings),
        alternatives=find_alternatives(planner, header, settings, limit, path, fits),
        budget=budget,
        notes=notes,
        trade_offs=trade_offs(found, prediction.memory.peak_rss_bytes),
        shortfall_bytes=shortfall,
        warnings=warnings,
        opencl=advice,
    )
