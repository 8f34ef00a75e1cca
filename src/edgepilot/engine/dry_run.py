"""llama.cpp's own no-allocation dry run: the compute buffer it would reserve, without loading weights.

This is what common/fit.cpp measures (model params no_alloc = true, load mode none). It reads the model's
metadata only, so it takes a fraction of a second even for multi-GB files; the planner's formulas are checked
against it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from edgepilot.engine import interrupts, llama_log
from edgepilot.engine.inprocess import EngineError, init_backend
from edgepilot.engine.llama_binding import llama_cpp
from edgepilot.engine.params import context_params, model_params
from edgepilot.plan.settings import EngineSettings

_BUFFER = re.compile(r"(?<!\w)(\w+) compute buffer size =\s+([\d.]+) MiB")


@dataclass
class DryRun:
    compute_bytes: int  # sum over backends of the reserved compute buffers
    n_ctx: int
    n_batch: int
    n_ubatch: int


def dry_run(model_path: Path, settings: EngineSettings) -> DryRun:
    with interrupts.deferred():  # a Ctrl-C in llama.cpp's callbacks is raised once it returns
        return _dry_run(model_path, settings)


def _dry_run(model_path: Path, settings: EngineSettings) -> DryRun:
    init_backend(verbose=False)
    start = llama_log.mark()
    mp = model_params(settings, no_alloc=True)
    model = llama_cpp.llama_model_load_from_file(str(model_path).encode(), mp)
    if not model:
        raise EngineError(f"llama.cpp could not read {model_path} for a dry run")
    try:
        cp = context_params(settings)
        ctx = llama_cpp.llama_init_from_model(model, cp)
        if not ctx:
            raise EngineError(f"llama.cpp refused a context with these settings (n_ctx={settings.n_ctx})")
        try:
            text = "".join(llama_log.lines_since(start))
            sizes = [float(mib) for _backend, mib in _BUFFER.findall(text)]
            if not sizes:
                raise EngineError("llama.cpp's dry run logged no compute buffer size")
            return DryRun(
                compute_bytes=int(sum(sizes) * (1 << 20)),
                n_ctx=llama_cpp.llama_n_ctx(ctx),
                n_batch=llama_cpp.llama_n_batch(ctx),
                n_ubatch=llama_cpp.llama_n_ubatch(ctx),
            )
        finally:
            llama_cpp.llama_free(ctx)
    finally:
        llama_cpp.llama_model_free(model)
