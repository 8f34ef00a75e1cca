"""`edgepilot quantize` through llama.cpp's own llama-quantize (the tools engine: no llama-cpp-python needed).

The same quantizer as the in-process llama_model_quantize (llama-quantize is a thin CLI over it), in the
version that is installed: its types are the ones its --help lists ("allowed quantization types"), which
a newer llama.cpp extends. What the in-process path passes as parameters goes on its command line:
--allow-requantize, --override-kv KEY=str:VALUE for the reference's origin, --imatrix FILE, nthreads.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path

from edgepilot.device.commands import run_output
from edgepilot.engine.base import EngineError
from edgepilot.engine.child_env import llama_env
from edgepilot.engine.tool_flags import help_text, known_flags
from edgepilot.errors import UserError
from edgepilot.safe_write import atomic_path
from edgepilot.store.quantize_checks import OUT_FIX

TYPE_LINE = re.compile(r"^\s*(\d+)\s+or\s+([A-Z][A-Z0-9_]*)\s*:", re.M)
FALLBACK = re.compile(r"(\d+) of \d+ tensor\(s\) required fallback")
FAILED = re.compile(r"failed to quantize:\s*(.*)$")
KV_VALUE_BYTES = 127  # llama_model_kv_override.val_str holds 128 bytes with its terminator
LOG_LINES = 400
LOG_BYTES = 8 << 20  # llama-quantize's output: a line per tensor (a 70B model has about 700)
QUANTIZE_BASE_S = 600.0
QUANTIZE_PER_GIB_S = 900.0


def tool_quant_types(tool: Path) -> dict[str, int]:
    """Type name -> llama_ftype, as this llama-quantize lists them (not COPY: it quantizes nothing)."""
    text = help_text(tool) or ""
    types = {name: int(ftype) for ftype, name in TYPE_LINE.findall(text)}
    if not types:
        raise EngineError(f"{tool} did not list its quantization types (is it llama.cpp's llama-quantize?)")
    return types


def kv_value(text: str) -> str:
    """The longest prefix of `text` that fits an override's value, cut on a character boundary."""
    return text.encode()[:KV_VALUE_BYTES].decode("utf-8", errors="ignore")


@dataclass(frozen=True)
class QuantizeJob:
    """One llama-quantize run: source quantized to type_name into target."""

    tool: Path
    source: Path
    target: Path
    type_name: str
    threads: int
    metadata: dict[str, str] | None = None  # written as string overrides (--override-kv)
    imatrix: str | None = None
    pure: bool = False  # --pure: every tensor in type_name


def quantize_argv(job: QuantizeJob) -> list[str]:
    argv = [str(job.tool), "--allow-requantize"] + (["--pure"] if job.pure else [])
    if job.metadata:
        known = known_flags(job.tool)
        if known is None or "--override-kv" in known:  # older ones: the reference's origin is not recorded
            for key, value in job.metadata.items():
                argv += ["--override-kv", f"{key}=str:{kv_value(value)}"]
    if job.imatrix is not None:
        argv += ["--imatrix", job.imatrix]
    return argv + [str(job.source), str(job.target), job.type_name, str(job.threads)]


def run_tool_quantizer(job: QuantizeJob) -> int:
    """llama-quantize into target (written to a fresh temporary file beside it, renamed when complete);
    returns the number of fallback tensors it reported. A UserError with llama.cpp's reason on failure."""
    log: deque[str] = deque(maxlen=LOG_LINES)
    inputs = [job.source] + ([Path(job.imatrix)] if job.imatrix else [])
    with atomic_path(job.target, inputs=inputs, what="quantized model", fix=OUT_FIX) as part:
        argv = quantize_argv(replace(job, target=part))
        # bounded like every program read for its output: its log is a line per tensor, and the deadline
        # grows with the model (minutes per GiB on a phone's cores)
        deadline = QUANTIZE_BASE_S + QUANTIZE_PER_GIB_S * _gib(job.source)
        done = run_output(argv, deadline, LOG_BYTES, env=llama_env(True, argv[0]), shown=str(job.tool))
        if not done.started:
            raise EngineError(done.reason or f"cannot start {job.tool}")
        if done.reason is not None:
            raise UserError(f"llama.cpp could not quantize {job.source.name}: {done.reason}")
        log.extend((done.stderr + "\n" + done.stdout).splitlines())
        if done.returncode != 0:
            reason = _reason(done.returncode, log)
            raise UserError(f"llama.cpp could not quantize {job.source.name}: {reason}")
    found = [FALLBACK.search(line) for line in log]
    return next((int(m.group(1)) for m in found if m), 0)


def _gib(path: Path) -> float:
    try:
        return path.stat().st_size / (1 << 30)
    except OSError:
        return 0.0


def _reason(rc: int, log: deque[str]) -> str:
    if rc < 0:
        return f"llama-quantize was killed by signal {-rc}" + (" (out of memory?)" if rc == -9 else "")
    failed = [m.group(1).strip() for m in map(FAILED.search, log) if m and m.group(1).strip()]
    errors = [line.strip() for line in log if "error" in line.lower()]
    return (failed or errors or [f"llama-quantize exit code {rc}"])[-1]
