"""The engine and the llama.cpp it runs: a libllama that is not the binding's own, a model architecture
the llama.cpp in use does not know yet (packaged llama.cpp follows upstream within weeks; a pinned binding
does not)."""

from __future__ import annotations

import re

from edgepilot.doctor.evidence import Evidence
from edgepilot.doctor.types import Cause, cause

# ctypes, when llama-cpp-python declares a function the loaded libllama lacks
UNDEFINED = re.compile(r"undefined symbol: (?:llama|ggml|gguf)_\w+")
UNKNOWN_ARCH = re.compile(r"unknown model architecture: '([^']+)'")
TOOLS_RAN = re.compile(r"llama[-_]server|--engine tools|llama-cli|llama-completion")


def engine_library_mismatch(ev: Evidence) -> list[Cause]:
    lines = ev.grep(UNDEFINED, limit=2)
    if not lines:
        return []
    fix = (
        "llama-cpp-python loads only the libllama it was built with: unset LLAMA_CPP_LIB_PATH (or point it "
        "at that build), or run the other llama.cpp through its own programs: `edgepilot run --engine tools` "
        "(llama-server from `pkg install llama-cpp`, `apt install llama.cpp-tools` or `edgepilot build`)"
    )
    return [cause("engine-library-mismatch", 95, lines, fix)]


def architecture_unsupported(ev: Evidence) -> list[Cause]:
    lines = ev.grep(UNKNOWN_ARCH, limit=1)
    if not lines:
        return []
    m = UNKNOWN_ARCH.search(lines[0])
    arch = m.group(1) if m else "this architecture"
    if ev.has(TOOLS_RAN) or any(TOOLS_RAN.search(a) for a in ev.command or []):
        fix = (
            f"this llama.cpp does not know '{arch}' yet: update it (`pkg upgrade llama-cpp`, `apt upgrade "
            "llama.cpp-tools`, `brew upgrade llama.cpp`); support lands upstream first, packages follow"
        )
    else:
        fix = (
            f"the in-process engine's llama.cpp (pinned with llama-cpp-python) does not know '{arch}': a "
            "packaged llama.cpp is usually newer: `pkg install llama-cpp` (Termux) or `apt install "
            "llama.cpp-tools`, then `edgepilot run --engine tools`; or check the file is a text model "
            "llama.cpp supports (`edgepilot inspect MODEL`)"
        )
    return [cause("architecture-unsupported", 90, [*lines, f"architecture: {arch}"], fix)]


RULES = (engine_library_mismatch, architecture_unsupported)
