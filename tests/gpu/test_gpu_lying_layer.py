"""The lying layer over lavapipe reproduces the field report's old Mali, and Debian's llama.cpp 0.7.0 dies on
it as on the phone: SIGSEGV, whatever -ngl says, while `-dev none` (or a driver kept from loading) survives.

Each row is a real run in the GPU lane; the exit status is the evidence (Debian's library is stripped)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sidlane as lane
from gpulane import DRIVER_OFF, SIGSEGV_RETURNCODE, completion, lying_env

SEGV = SIGSEGV_RETURNCODE
# mode -> {column: expected returncode}: measured with Debian sid's llama.cpp 0.7.0 (ggml 0.27), Mesa 26.2.
MATRIX: dict[str, dict[str, int]] = {
    "bda": {
        "-ngl 99": SEGV, "-ngl 0": SEGV, "default": SEGV, "-dev none": 0,
        "-dev none + VK_DRIVER_FILES": 0, "-dev none + VK_LOADER_DRIVERS_DISABLE": 0,
        "-dev none + GGML_VK_VISIBLE_DEVICES=": 0,
        "-ngl 99 + VK_DRIVER_FILES": 0, "-ngl 99 + VK_LOADER_DRIVERS_DISABLE": 0,
        "-ngl 99 + GGML_VK_VISIBLE_DEVICES=": 0,
    },
    "create-device": {
        "-ngl 99": SEGV, "-ngl 0": SEGV, "default": SEGV, "-dev none": 0,
        "-dev none + VK_DRIVER_FILES": 0, "-dev none + VK_LOADER_DRIVERS_DISABLE": 0,
        "-dev none + GGML_VK_VISIBLE_DEVICES=": 0,
        "-ngl 99 + VK_DRIVER_FILES": 0, "-ngl 99 + VK_LOADER_DRIVERS_DISABLE": 0,
        "-ngl 99 + GGML_VK_VISIBLE_DEVICES=": 0,
    },
    # Loading libggml-vulkan.so enumerates devices before GGML_VK_VISIBLE_DEVICES is read: only a loader that
    # finds no driver saves the run.
    "enumerate": {
        "-ngl 99": SEGV, "-ngl 0": SEGV, "default": SEGV, "-dev none": SEGV,
        "-dev none + VK_DRIVER_FILES": 0, "-dev none + VK_LOADER_DRIVERS_DISABLE": 0,
        "-dev none + GGML_VK_VISIBLE_DEVICES=": SEGV,
        "-ngl 99 + VK_DRIVER_FILES": 0, "-ngl 99 + VK_LOADER_DRIVERS_DISABLE": 0,
        "-ngl 99 + GGML_VK_VISIBLE_DEVICES=": SEGV,
    },
}  # fmt: skip
CASES = [(mode, column, rc) for mode, row in MATRIX.items() for column, rc in row.items()]


def _column(column: str) -> tuple[list[str], dict[str, str]]:
    """`-dev none + VK_DRIVER_FILES` -> (["-dev", "none"], {"VK_DRIVER_FILES": "/nonexistent.json"})."""
    flags, _, env_name = column.partition(" + ")
    return ([] if flags == "default" else flags.split()), (DRIVER_OFF[env_name] if env_name else {})


@pytest.mark.parametrize(("mode", "column", "expected"), CASES, ids=[f"{m}|{c}" for m, c, _ in CASES])
def test_exit_status_by_mode_and_setting(
    gpu_root: Path, lying_layer: str, smollm_in_root: str, mode: str, column: str, expected: int
) -> None:
    flags, env = _column(column)
    env = lying_env(lying_layer, mode, **env)
    done = lane.run(gpu_root, completion(smollm_in_root, *flags), env, timeout=300)
    assert done.returncode == expected, f"{mode} {column}: {done.returncode}\n{done.stderr[-1500:]}"
    if expected == 0:
        assert done.stdout.startswith("Hi"), done.stdout  # it generated, on the CPU


def test_the_disguise_is_what_vulkaninfo_and_llama_cpp_see(gpu_root: Path, lying_layer: str) -> None:
    info = lane.run(gpu_root, ["vulkaninfo", "--summary"], lying_env(lying_layer, "bda"))
    assert info.returncode == 0, info.stderr[-1500:]
    summary = " ".join(info.stdout.split())
    facts = ("apiVersion = 1.1.177", "vendorID = 0x13b5", "PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU",
             "deviceName = Mali-G77 MC9", "DRIVER_ID_ARM_PROPRIETARY",
             "driverName = Mali-G77 r32p1")  # fmt: skip
    for fact in facts:
        assert fact in summary
    # Integrated: ggml lists it without GGML_VK_VISIBLE_DEVICES, and --list-devices exits 0 on it.
    listed = lane.run(gpu_root, ["llama-server", "--list-devices"], lying_env(lying_layer, "bda"))
    assert listed.returncode == 0
    assert "Vulkan0: Mali-G77 MC9" in listed.stdout
    # The layer alone (mode off) leaves lavapipe a CPU-type device that ggml skips.
    honest = lane.run(gpu_root, ["llama-server", "--list-devices"], lying_env(lying_layer, "off"))
    assert honest.returncode == 0 and "Vulkan0" not in honest.stdout, honest.stdout


def test_bda_dies_at_the_first_vulkan_buffer(gpu_root: Path, lying_layer: str, smollm_in_root: str) -> None:
    """llama-bench -v logs synchronously: it dies while loading the weights, before any buffer size is
    printed (the first Vulkan buffer's address is asked of a NULL vkGetBufferDeviceAddress)."""
    argv = ["llama-bench", "-m", smollm_in_root, "-p", "8", "-n", "2", "-r", "1", "-ngl", "99", "-v"]
    done = lane.run(gpu_root, argv, lying_env(lying_layer, "bda"), timeout=300)
    assert done.returncode == SEGV, done.stderr[-1500:]
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert any(ln.startswith("ggml_vulkan: 0 = Mali-G77 MC9 (Mali-G77 r32p1) | uma: 1") for ln in lines)
    assert "using device Vulkan0 (Mali-G77 MC9)" in done.stderr
    assert "load_tensors: loading model tensors" in done.stderr
    assert "buffer size" not in done.stderr
    assert lines[-1].startswith(("load_tensors:", "create_tensor:")), lines[-3:]


def test_lavapipe_offload_runs_when_made_visible(gpu_root: Path, smollm_in_root: str) -> None:
    """The model on the honest lavapipe (GGML_VK_VISIBLE_DEVICES=0): weights, KV and compute on Vulkan0."""
    argv = completion(smollm_in_root, "-ngl", "99", "-lv", "4")
    done = lane.run(gpu_root, argv, {"GGML_VK_VISIBLE_DEVICES": "0"}, timeout=600)
    assert done.returncode == 0, done.stderr[-1500:]
    for line in ("Vulkan0 model buffer size", "Vulkan0 KV buffer size", "Vulkan0 compute buffer size",
                 "common_memory_breakdown_print: |   - Vulkan0 (llvmpipe"):  # fmt: skip
        assert line in done.stderr, line
