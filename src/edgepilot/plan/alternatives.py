"""What to try when a model does not fit (or to get more context): each option with its predicted peak."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.model.gguf_records import GGUFHeader
from edgepilot.model.quant_types import estimate_file_bytes, quant_for_file_type, smaller_than
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.types import Alternative

if TYPE_CHECKING:
    from edgepilot.plan.fit import Planner

MIN_USEFUL_CTX = 512
MAX_QUANT_OPTIONS = 3


def _cmd(path: Path, settings: EngineSettings) -> list[str]:
    return ["llama-cli", "-m", str(path), *settings.llama_cpp_args()]


def _option(
    planner: Planner, kind: str, text: str, s: EngineSettings, budget: int, path: Path
) -> Alternative:
    peak = planner.peak(s)
    return Alternative(kind, text, peak, peak <= budget, _cmd(path, s))


def find_alternatives(
    planner: Planner, header: GGUFHeader, settings: EngineSettings, budget: int, path: Path, fits: bool
) -> list[Alternative]:
    out: list[Alternative] = []
    best_ctx = planner.max_ctx(settings, budget)
    if not fits and best_ctx >= MIN_USEFUL_CTX:
        smaller = replace(settings, n_ctx=best_ctx)
        out.append(
            _option(
                planner,
                "smaller-context",
                f"context {best_ctx} (the largest that fits)",
                smaller,
                budget,
                path,
            )
        )

    if settings.type_v == "f16":
        q8 = replace(settings, type_k="q8_0", type_v="q8_0", flash_attn=True)
        q8_ctx = planner.max_ctx(q8, budget)
        if q8_ctx > best_ctx:
            text = f"q8_0 KV cache with flash attention: context up to {q8_ctx}"
            out.append(_option(planner, "kv-quant", text, replace(q8, n_ctx=q8_ctx), budget, path))

    if settings.n_ubatch > 128:
        small_ub = replace(settings, n_ubatch=128)
        ub_ctx = planner.max_ctx(small_ub, budget)
        if ub_ctx > best_ctx:
            text = f"ubatch 128 (slower prompt processing, smaller compute buffer): context up to {ub_ctx}"
            out.append(
                _option(planner, "smaller-ubatch", text, replace(small_ub, n_ctx=ub_ctx), budget, path)
            )

    if not fits:
        out += _smaller_quants(planner, header, settings, budget)
    return out


def _smaller_quants(
    planner: Planner, header: GGUFHeader, settings: EngineSettings, budget: int
) -> list[Alternative]:
    """The same model at a smaller quantization: weights from parameter count x bits per weight."""
    current = quant_for_file_type(header.metadata.get("general.file_type"))
    if current is None:
        return []
    prediction = planner.predict(settings)
    weights_now = prediction.memory.weights_bytes + prediction.memory.repack_bytes
    n_params = sum(t.n_elements for t in header.tensors)
    options: list[Alternative] = []
    for q in smaller_than(current.name):
        weights = estimate_file_bytes(n_params, q.name)
        peak = prediction.memory.peak_rss_bytes - weights_now + weights
        if peak <= budget:
            text = f"{q.name} quantization of the same model (~{weights / 2**20:.0f} MiB of weights)"
            options.append(
                Alternative(
                    "smaller-quant",
                    text,
                    peak,
                    True,
                    ["llama-quantize", "MODEL-F16.gguf", f"MODEL-{q.name}.gguf", q.name],
                )
            )
        if len(options) >= MAX_QUANT_OPTIONS:
            break
    return options
