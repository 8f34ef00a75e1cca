"""Build and install causes: frameworks whose CPU backend needs x86 (vLLM: AVX2/AVX512) on an ARM device."""

from __future__ import annotations

import re

from edgepilot.doctor.evidence import Evidence
from edgepilot.doctor.types import Cause, cause

NEEDS_X86 = re.compile(
    r"requires AVX512|requires AVX2|requires AVX512 or AVX2|"
    r"unrecognized command[- ]line option .?-m(avx|sse|f16c|fma)|"
    r"error: unknown target CPU|(x86|imm|emm)intrin\.h.{0,40}(No such file|not found)",
    re.I,
)


def framework_needs_x86(ev: Evidence) -> list[Cause]:
    lines = ev.grep(NEEDS_X86, limit=3)
    if not lines:
        return []
    evidence = lines + ev.grep(r"aarch64|arm64|armv\d", limit=1)
    cpu = ev.probe.cpu if ev.probe is not None else None
    if cpu is not None and cpu.isa not in ("x86_64", "unknown"):
        evidence.append(f"this device is {cpu.isa} ({cpu.arch}): no AVX2/AVX512 here")
    fix = (
        "vLLM's CPU backend needs an x86 CPU with AVX2/AVX512: on an ARM phone or board (or an older x86 "
        "CPU) use llama.cpp with a GGUF model instead (`pkg install llama-cpp` in Termux, or "
        "`edgepilot run MODEL.gguf`); convert "
        "Hugging Face weights with llama.cpp's convert_hf_to_gguf.py"
    )
    return [cause("framework-needs-x86", 90, evidence, fix)]


RULES = (framework_needs_x86,)
