"""`edgepilot build --vulkan`: ggml's Vulkan backend in the tools, with the old-Mali fix (vulkan_fix.py).

The Vulkan backend needs glslc (shaderc), the Vulkan and SPIR-V headers and a Vulkan loader to link against;
its ~150 shaders are compiled into the library at build time. Once a build has the backend, a later
`edgepilot build` keeps it unless `--no-vulkan` says otherwise: a user who fixed their GPU keeps it fixed.
"""

from __future__ import annotations

import os
from pathlib import Path

from edgepilot.device.llama_build import read_stamp
from edgepilot.errors import UserError
from edgepilot.program_path import which
from edgepilot.toolchain.flags import BuildFlags
from edgepilot.toolchain.vulkan_fix import applied_id, fix_id

# What each system calls the pieces (Termux's llama-cpp package builds its Vulkan backend from the same ones).
HINTS = {
    True: "pkg install shaderc vulkan-headers vulkan-loader-android spirv-headers",
    False: "apt-get install glslc libvulkan-dev spirv-headers (or your system's packages)",
}
HEADER_DIRS = ("include", "local/include")


def wants_vulkan(asked: bool | None, stamp: Path, target: str) -> bool:
    """--vulkan / --no-vulkan as given, else what the last build of this target had."""
    if asked is not None:
        if asked and target != "native":
            raise UserError(
                "--vulkan builds for this device only: run `edgepilot build --vulkan` on the phone "
                "(cross-building would need the phone's Vulkan loader)"
            )
        return asked
    return target == "native" and built_with_vulkan(stamp)


def built_with_vulkan(stamp: Path) -> bool:
    defines = read_stamp(stamp).get("defines")
    return isinstance(defines, dict) and defines.get("GGML_VULKAN") == "ON"


def add_vulkan(flags: BuildFlags, own_source: bool) -> str | None:
    """Turn the backend on in `flags`; the fix's id when the engine's own source will carry it."""
    flags.defines["GGML_VULKAN"] = "ON"
    if own_source:
        flags.reasons.append(
            "Vulkan backend on, with edgepilot's old-Mali fix: below Vulkan 1.2 no buffer device "
            "address, 1.1-era feature structs, a Vulkan 1.1 loader accepted"
        )
        return fix_id()
    flags.reasons.append("Vulkan backend on; your --source directory is built as it is (no old-Mali fix)")
    return None


def stale_fix(src: Path, fix: str | None) -> bool:
    """src carries a fix other than `fix` (an older edgepilot's): it must be unpacked again, not rebuilt."""
    found = applied_id(src)
    return fix is not None and found is not None and found != fix


def check_vulkan_toolchain(termux: bool) -> None:
    """UserError (exit 2) naming the packages when glslc or the Vulkan/SPIR-V headers are missing."""
    missing = []
    if which("glslc") is None:
        missing.append("glslc")
    prefixes = [Path(p) for p in (os.environ.get("PREFIX"), "/usr", "/usr/local") if p]
    if not any((p / d / "vulkan" / "vulkan.h").is_file() for p in prefixes for d in HEADER_DIRS):
        missing.append("the Vulkan headers")
    spirv = ("include/spirv/unified1/spirv.hpp", "share/cmake/SPIRV-Headers")
    if not any((p / rel).exists() for p in prefixes for rel in spirv):
        missing.append("the SPIR-V headers")
    if missing:
        raise UserError(
            f"{', '.join(missing)} not found (the Vulkan backend needs them): {HINTS[termux]}; or "
            "`edgepilot build --no-vulkan` for the CPU alone"
        )
