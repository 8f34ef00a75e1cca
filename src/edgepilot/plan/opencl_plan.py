"""fit's GPU path on an OpenCL device (an Adreno): the offloaded run's memory, and whether the model's weight
types are ones ggml-opencl's kernels are fast for; if not, the requantization that makes them so.

The weights counted are the matrices the device multiplies: every 2-D tensor of the repeating layers and the
output projection (a tied output is token_embd, multiplied there as the output); the input embedding is
read with GET_ROWS on the CPU and 1-D tensors (norms, biases) are no matrix products. Speeds per type:
device/opencl_verdict.py. Requantizing an already quantized model needs llama-quantize's
--allow-requantize (it refuses otherwise: "requantizing from type q4_K is disabled"); --pure makes every
tensor the one type, the output and embeddings included (without it llama.cpp keeps some at Q6_K/Q8_0).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.device import fs
from edgepilot.device.root_archive import open_root
from edgepilot.gguf.gguf_records import GGUFHeader
from edgepilot.plan.commands import edgepilot_command, llama_cpp_command
from edgepilot.plan.layers import TOKEN_EMBD, layer_of, tied_output
from edgepilot.plan.planner import Planner
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.types import OffloadPlan, OpenCLAdvice

if TYPE_CHECKING:
    from edgepilot.device.opencl import OpenCLDevice

LLAMA_NAME = "GPUOpenCL"  # ggml-opencl names every device so (ggml_backend_opencl_device_get_name)
PRECISE = ("F32", "F16", "BF16")


def matrix_weights(header: GGUFHeader, n_layer: int) -> dict[str, int]:
    """Bytes of the matrices the device multiplies, by ggml type name."""
    tied = tied_output(header)
    out: dict[str, int] = {}
    for t in header.tensors:
        if len([d for d in t.shape if d > 1]) < 2:
            continue
        on_device = layer_of(t.name, n_layer) is not None or (tied and t.name == TOKEN_EMBD)
        if on_device:
            name = t.type_name or f"type {t.ggml_type}"
            out[name] = out.get(name, 0) + (t.n_bytes or 0)
    return out


def requantize_commands(
    model: Path, quant: str, source_type: str | None
) -> tuple[Path, list[str], list[str]]:
    """(the output file, llama-quantize's command, edgepilot's) for a pure `quant` copy of `model`."""
    from edgepilot.gguf.quant_types import output_stem

    out = model.parent / f"{output_stem(model)}-{quant}-pure.gguf"
    llama = ["llama-quantize"]
    if (source_type or "").upper() not in PRECISE:
        llama.append("--allow-requantize")
    llama += ["--pure", str(model), str(out), quant]
    ours = ["edgepilot", "quantize", str(model), "--to", quant, "--pure"]
    return out, llama, ours


def read_devices(root: Path | str, android: bool, requested: str | None) -> list[OpenCLDevice]:
    """The OpenCL devices at `root`: a device tree's clinfo; on this machine clinfo is run (a bounded child)
    only on Android or when --device names an OpenCL device (a desktop's ICDs are no phone GPU path)."""
    with open_root(Path(root)) as base:
        if fs.is_live(base) and not android and not _names_opencl(requested):
            return []
        from edgepilot.device.opencl import read_opencl  # clinfo's parsing: only where it may run

        return read_opencl(base, android)[0]


def _names_opencl(device: str | None) -> bool:
    """--device names an OpenCL device; without one, llama.cpp's device tables are not even imported."""
    if not device:
        return False
    from edgepilot.device.gpu_llama import backend_of

    return backend_of(device) == "opencl"


def opencl_advice(
    devices: list[OpenCLDevice],
    header: GGUFHeader,
    model: Path,
    source_type: str | None,
    planner: Planner,
    settings: EngineSettings,
    limit: int,
) -> OpenCLAdvice | None:
    """None without an OpenCL device; for a device ggml-opencl refuses, its verdict and why."""
    if not devices:
        return None
    from edgepilot.device.opencl import usable
    from edgepilot.device.opencl_verdict import Judgement, speed_of

    dev = usable(devices)
    if dev is None:
        first = devices[0]
        return OpenCLAdvice(first.name, first.verdict, list(first.reasons))
    n_layer = planner.arch.n_layer
    weights = matrix_weights(header, n_layer)
    judged = Judgement(dev.family, True, fast_types=dev.fast_types, slower_types=dev.slower_types)
    typed = {name: {"bytes": size, "speed": speed_of(name, judged)} for name, size in weights.items()}
    total = sum(weights.values()) or 1
    slow = sum(size for name, size in weights.items() if typed[name]["speed"] != "fast")
    advice = OpenCLAdvice(
        dev.name,
        dev.verdict,
        list(dev.reasons),
        list(dev.fast_types),
        typed,
        fast=slow == 0,
        slower_share=round(slow / total, 4),
        recommended_quant=dev.recommended_quant,
    )
    if not advice.fast and dev.recommended_quant:
        out, llama, ours = requantize_commands(model, dev.recommended_quant, source_type)
        advice.requantize_out, advice.llama_quantize_args, advice.edgepilot_quantize_args = (
            str(out),
            llama,
            ours,
        )
    advice.offload = _offloaded(dev, model, planner, settings, limit)
    return advice


def _offloaded(
    dev: OpenCLDevice, model: Path, planner: Planner, settings: EngineSettings, limit: int
) -> OffloadPlan:
    name = dev.llama_cpp_name or LLAMA_NAME
    if settings.device == name:
        gpu = settings
    else:
        gpu = replace(settings, device=name, n_gpu_layers=planner.arch.n_layer + 1)
    pred = planner.predict(gpu)
    peak = pred.memory.peak_rss_bytes
    return OffloadPlan(
        device=name,
        n_gpu_layers=gpu.n_gpu_layers,
        peak_rss_bytes=peak,
        fits=peak <= limit,
        device_bytes=sum(pred.memory.device_bytes.values()),
        max_ctx=planner.max_ctx(gpu, limit),
        llama_cpp_args=llama_cpp_command(model, gpu),
        edgepilot_args=edgepilot_command(model, gpu, tool="run"),
        notes=pred.offload.notes[1:] if pred.offload else [],
    )
