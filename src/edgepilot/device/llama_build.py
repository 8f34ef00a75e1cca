"""What a llama.cpp program edgepilot built carries, from the build stamp beside its bin/ folder
(toolchain/builder.py writes it): the old-Mali fix of `edgepilot build --vulkan`, for probe's verdict."""

from __future__ import annotations

from pathlib import Path

from edgepilot.untrusted import loads_json, read_capped

STAMP_LIMIT = 64 * 1024  # a stamp is a few hundred bytes


def read_stamp(path: Path) -> dict:
    """The stamp's JSON object, {} when it is missing, unreadable, too large, nested too deep or not an
    object; a regular file only (a FIFO there never blocks probe or build)."""
    try:
        data = loads_json(read_capped(path, STAMP_LIMIT))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def vulkan_fix_of(tool: Path | str | None) -> str | None:
    """The old-Mali fix the llama.cpp program `tool` was built with, or None."""
    if tool is None:
        return None
    try:
        bin_dir = Path(tool).resolve().parent
    except (OSError, RuntimeError):
        return None
    if bin_dir.name != "bin":
        return None
    found = read_stamp(bin_dir.parent / "build.stamp").get("vulkan_fix")
    return found if isinstance(found, str) else None
