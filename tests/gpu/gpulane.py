"""The lying Vulkan layer in the GPU lane: build it in the root (cached by source hash), and the environment
that loads it. Modes (EDGEPILOT_LYING_MODE): `bda`, `create-device`, `enumerate`, `slow` (busy in pipeline
creation for EDGEPILOT_LYING_SPIN_S seconds), `off` (lying_layer.c)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import sidlane as lane

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "lying_layer.c"
MANIFEST = HERE / "VkLayer_edgepilot_lying.json"
LIBRARY = "libVkLayer_edgepilot_lying.so"
LAYER_NAME = "VK_LAYER_EDGEPILOT_lying"
MODE_ENV = "EDGEPILOT_LYING_MODE"
SPIN_ENV = "EDGEPILOT_LYING_SPIN_S"
# What the GPU lane needs in the root, beyond the packaged lane's llama.cpp.
PIECES = {
    "libggml0-backend-vulkan": "usr/lib/x86_64-linux-gnu/ggml/backends0/libggml-vulkan.so",
    "mesa-vulkan-drivers (lavapipe)": "usr/share/vulkan/icd.d/lvp_icd.json",
    "libvulkan-dev": "usr/include/vulkan/vk_layer.h",
    "vulkan-tools": "usr/bin/vulkaninfo",
    "gcc": "usr/bin/gcc",
    "spirv-headers": "usr/share/cmake/SPIRV-Headers",
    "glslc": "usr/bin/glslc",
    "cmake": "usr/bin/cmake",
    "g++": "usr/bin/g++",
}
# Ways to keep the Vulkan driver from loading at all (the Khronos loader's and ggml's own).
DRIVER_OFF = {
    "VK_DRIVER_FILES": {"VK_DRIVER_FILES": "/nonexistent.json"},
    "VK_LOADER_DRIVERS_DISABLE": {"VK_LOADER_DRIVERS_DISABLE": "*"},
    "GGML_VK_VISIBLE_DEVICES=": {"GGML_VK_VISIBLE_DEVICES": ""},
}
SIGSEGV_RETURNCODE = -11  # subprocess's way of saying "killed by signal 11"; a shell says 139


def missing_pieces(root: Path) -> list[str]:
    return [name for name, rel in PIECES.items() if not (root / rel).exists()]


def source_hash() -> str:
    h = hashlib.sha256(SOURCE.read_bytes() + MANIFEST.read_bytes())
    return h.hexdigest()[:12]


def build_layer(root: Path) -> str:
    """Compile lying_layer.c with the root's gcc against its Vulkan headers into /opt/ep-lying-HASH."""
    inside = f"/opt/ep-lying-{source_hash()}"
    dest = lane.host_path(root, inside)
    if (dest / LIBRARY).is_file():
        return inside
    work = dest.with_name(dest.name + ".build")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copy2(SOURCE, work / SOURCE.name)
    shutil.copy2(MANIFEST, work / MANIFEST.name)
    cc = ["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror"]
    out, src = f"{inside}.build/{LIBRARY}", f"{inside}.build/{SOURCE.name}"
    done = lane.run(root, [*cc, "-o", out, src, "-lpthread"])
    if done.returncode != 0:
        raise RuntimeError(f"building the lying layer failed:\n{done.stderr[-3000:]}")
    work.rename(dest)
    return inside


def lying_env(layer_dir: str, mode: str, **extra: str) -> dict[str, str]:
    """The environment that puts the layer over lavapipe in `mode` (no GGML_VK_VISIBLE_DEVICES: the disguised
    device is an integrated GPU, which ggml uses without it, as on a phone)."""
    return {"VK_LAYER_PATH": layer_dir, "VK_INSTANCE_LAYERS": LAYER_NAME, MODE_ENV: mode, **extra}


def completion(model: str, *flags: str) -> list[str]:
    """A short greedy llama-completion run (lavapipe is ~50x slower than the CPU here)."""
    short = ["-p", "Hi", "-n", "2", "-no-cnv", "--temp", "0", "-c", "256"]
    return ["llama-completion", "-m", model, *short, *flags]
