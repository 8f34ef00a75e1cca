"""Where llama.cpp's own tools built for this device live (`edgepilot build` puts them there).

The tools come from the llama.cpp vendored in the llama-cpp-python sdist, so a tool and the in-process
engine run the same commit (RPC client and server must match). One directory per target and engine version:
$EDGEPILOT_TOOLS_DIR/<target> when set, else ${XDG_CACHE_HOME:-~/.cache}/edgepilot/tools/<target>-<version>,
binaries and their shared libraries in its `bin/`.
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from edgepilot.errors import UserError

TOOL_NAMES = ("llama-server", "llama-bench", "llama-completion", "rpc-server", "llama-quantize")
TARGETS = ("native", "aarch64")


class ToolMissing(UserError):
    """A llama.cpp tool that `edgepilot build` has not built (yet) for this target."""


def engine_version() -> str:
    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        return "unknown"


def tools_dir(target: str = "native") -> Path:
    if target not in TARGETS:
        raise UserError(f"unknown build target {target!r}: choose one of {', '.join(TARGETS)}")
    explicit = os.environ.get("EDGEPILOT_TOOLS_DIR")
    if explicit:
        return Path(explicit).expanduser() / target
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "edgepilot" / "tools" / f"{target}-{engine_version()}"


def find_tool(name: str, target: str = "native") -> Path:
    """The built tool's path; ToolMissing (one line, exit 2) says how to build it."""
    path = tools_dir(target) / "bin" / name
    if not (path.is_file() and os.access(path, os.X_OK)):
        flag = "" if target == "native" else f" --target {target}"
        raise ToolMissing(f"llama.cpp's {name} is not built here: run `edgepilot build{flag}` first")
    return path
