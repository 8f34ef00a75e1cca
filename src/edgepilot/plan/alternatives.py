"""What to try when a model does not fit (or to get more context): each option with its predicted peak."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.gguf.gguf_records import GGUFHeader
from edgepilot.plan.commands import llama_cpp_command
from edgepilot.plan.search import MIN_USEFUL_CTX, QUANTIZED_KV
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.types import Alternative

if TYPE_CHECKING:
    from edgepilot.plan.planner import Planner

MAX_QUANT_OPTIONS = 2
MIB = 1 << 20


def _option(
    planner: Planner, kind: str, text: str, s: EngineSettings, budget: int, path: Path
) -> Alternative:
    peak = planner.peak(s)
    return Alternative(kind, text, peak, peak <= budget, llama_cpp_command(path, s))


def _setting_changes(settings: EngineSettings) -> list[tuple[str, str, EngineSettings]]:
    """(kind, description, settings) for each memory trade not already made."""
    out = []
    if settings.use_mmap:
        out.append(("no-mmap", "--no-mmap (read the weights into memory)", replace(settings, use_mmap=False)))
    if settings.repack:
        out.append(("no-repack", "--no-repack (slower prompt processing)", replace(settings, repack=False)))
    if settings.type_v == "f16":
        q8 = replace(settings, type_k=QUANTIZED_KV, type_v=QUANTIZED_KV, flash_attn=True)
        out.append(("kv-quant", f"{QUANTIZED_KV} KV cache with flash attention", q8))
    if settings.n_ubatch > 128:
        out.append(
            ("smaller-ubatch", "ubatch 128 (slower prompt processing)", replace(settings, n_ubatch=128))
        )
    return out


def find_alternatives(
    planner: Planner, header: GGUFHeader, settings: EngineSettings, budget: int, path: Path, fits: bool
) -> list[Alternative]:
    out: list[Alternative] = []
    best_ctx = planner.max_ctx(settings, budget)
    if not fits and best_ctx >= MIN_USEFUL_CTX:
        text = f"context {best_ctx} (the largest that fits)"
        out.append(_option(planner, "smaller-context", text, replace(settings, n_ctx=best_ctx), budget, path))
    base_peak = planner.peak(settings)
    for kind, text, changed in _setting_changes(settings):
        ctx = planner.max_ctx(changed, budget)
        if fits and ctx > best_ctx:  # more context than the plan's settings allow
            out.append(
                _option(
                    planner, kind, f"{text}: context up to {ctx}", replace(changed, n_ctx=ctx), budget, path
                )
            )
        elif not fits and planner.peak(changed) < base_peak:  # closer to the budget at the same context
            out.append(_option(planner, kind, f"{text} at context {settings.n_ctx}", changed, budget, path))
    if not fits:
        out += _smaller_quants(planner, header, settings, budget)
        lean = without_interpreter(planner, settings, budget, path)
        if lean is not None:
            out.append(lean)
        largest = _largest_model(planner, header, settings, budget)
        if largest is not None:
            out.append(largest)
    return out


def without_interpreter(
    planner: Planner, settings: EngineSettings, budget: int, path: Path
) -> Alternative | None:
    """The same settings run by llama.cpp's own llama-completion, which carries no Python interpreter: for a
    plan of the in-process engine on the CPU (llama.cpp's programs are planned with their own runtime)."""
    from edgepilot.plan.memory_model import INTERPRETER_BYTES, program_arithmetic
    from edgepilot.plan.planner import CTX_STEP, Planner

    if planner.arithmetic is not None or planner.reserve_bytes or not settings.on_cpu:
        return None
    lean = Planner(planner.header, planner.arch, planner.device, arithmetic=program_arithmetic(planner.arch))
    ctx = min(settings.n_ctx, lean.max_ctx(settings, budget)) or min(settings.n_ctx, CTX_STEP)
    s = replace(settings, n_ctx=ctx)
    peak = lean.peak(s)
    text = (
        f"llama.cpp's llama-completion (no Python runtime: {INTERPRETER_BYTES // MIB} MiB less) at context "
        f"{ctx}"
    )
    command = llama_cpp_command(path, s, tool="llama-completion", extra=["-no-cnv"])
    return Alternative("llama-completion", text, peak, peak <= budget, command)


def _weights_now(planner: Planner, settings: EngineSettings) -> tuple[int, int]:
    """(resident weight bytes incl. repack copies, peak) of the plan's settings."""
    memory = planner.predict(settings).memory
    return memory.weights_bytes + memory.repack_bytes, memory.peak_rss_bytes


def _smaller_quants(
    planner: Planner, header: GGUFHeader, settings: EngineSettings, budget: int
) -> list[Alternative]:
    """The same model at a smaller quantization: its weights as llama-quantize would write them."""
    from edgepilot.gguf.quant_types import quant_for_file_type, smaller_than
    from edgepilot.gguf.requant_size import requantized_bytes

    current = quant_for_file_type(header.metadata.get("general.file_type"))
    if current is None:
        return []
    weights_now, peak_now = _weights_now(planner, settings)
    resident_share = weights_now / max(1, sum(t.n_bytes or 0 for t in header.tensors))  # >1: repack copies
    options: list[Alternative] = []
    for q in smaller_than(current.name):  # largest first: the first that fits is the one to name
        weights = requantized_bytes(header, q.name)  # with llama-quantize's fallbacks
        peak = peak_now - weights_now + int(weights * resident_share)
        text = f"{q.name} quantization of the same model (~{weights / MIB:.0f} MiB of weights)"
        command = ["llama-quantize", "MODEL-F16.gguf", f"MODEL-{q.name}.gguf", q.name]
        options.append(Alternative("smaller-quant", text, peak, peak <= budget, command))
        if peak <= budget:
            break
    # the largest quantization that fits and the one above it (or the two smallest, if none fits)
    return options[-MAX_QUANT_OPTIONS:]


def _largest_model(
    planner: Planner, header: GGUFHeader, settings: EngineSettings, budget: int
) -> Alternative | None:
    """The largest parameter count that fits at this quantization, the rest of the plan scaled alike."""
    n_params = sum(t.n_elements for t in header.tensors)
    weights_now, peak_now = _weights_now(planner, settings)
    if n_params <= 0 or weights_now <= 0:
        return None
    # weights, KV cache and compute grow roughly with the parameter count; the runtime does not
    runtime = planner.predict(settings).memory.runtime_bytes
    scale = (budget - runtime) / max(1, peak_now - runtime)
    if scale <= 0:
        return None
    fitting = int(n_params * min(scale, 1.0))
    peak = runtime + int((peak_now - runtime) * fitting / n_params)
    text = f"a model of about {fitting / 1e9:.1f}B parameters at this quantization and context"
    if fitting < 1e9:
        text = f"a model of about {fitting / 1e6:.0f}M parameters at this quantization and context"
    return Alternative("smaller-model", text, peak, peak <= budget, [])
