"""`edgepilot build` flags per device (the device trees of tests/devices) and its refusals."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from edgepilot.device.probe import probe
from edgepilot.errors import UserError
from edgepilot.toolchain.builder import build_tools, check_toolchain
from edgepilot.toolchain.flags import CROSS_ARM_ARCH, choose_flags

# tree -> (GGML_CPU_ARM_ARCH or None, OpenMP on?)
EXPECTED = {
    "pixel6a-tensor-g1": ("armv8.2-a+dotprod+fp16", False),  # Tensor G1: X1/A76/A55, no i8mm; Termux
    "sd8gen2-xiaomi13pro": ("armv8.2-a+dotprod+fp16+i8mm", False),  # i8mm; the kernel hides SVE
    "redmi-note8-termux32": (None, False),  # 32-bit userland: compiler default NEON
    "raspberry-pi5": ("armv8.2-a+dotprod+fp16", True),  # Cortex-A76, Linux with libgomp
    "xperia10ii-sd665": ("armv8-a", False),  # Cortex-A73/A53: no dotprod
    "x86-laptop-i7-1165g7": (None, True),
}


@pytest.mark.parametrize("tree", sorted(EXPECTED))
def test_flags_follow_the_device(devices, tree):
    device = probe(devices / tree)
    flags = choose_flags("native", device.cpu, device.android)
    arch, openmp = EXPECTED[tree]
    assert flags.arm_arch == arch
    assert flags.openmp is openmp
    assert flags.defines["GGML_RPC"] == "ON" and flags.defines["LLAMA_CURL"] == "OFF"
    assert flags.defines["LLAMA_BUILD_SERVER"] == "ON" and flags.defines["LLAMA_BUILD_TESTS"] == "OFF"
    if device.cpu.isa in ("arm64", "x86_64", "arm32"):
        assert flags.defines["GGML_NATIVE"] == "OFF"


def test_x86_laptop_gets_the_portable_set_not_avx512(devices):
    device = probe(devices / "x86-laptop-i7-1165g7")
    assert "avx512f" in device.cpu.features  # the CPU has it: the build still does not turn it on
    flags = choose_flags("native", device.cpu, device.android)
    on = {k for k, v in flags.defines.items() if v == "ON"}
    assert {"GGML_AVX", "GGML_AVX2", "GGML_FMA", "GGML_F16C", "GGML_BMI2"} <= on
    assert not any("AVX512" in k or "AMX" in k for k in on)
    assert "avx2" in flags.march()


def test_cross_target_is_the_lane_toolchain():
    flags = choose_flags("aarch64", None, None)
    assert flags.cross and flags.arm_arch == CROSS_ARM_ARCH and not flags.openmp
    assert flags.defines["CMAKE_CXX_COMPILER"] == "aarch64-linux-gnu-g++"
    assert choose_flags("aarch64", None, None, "armv8.2-a+dotprod").arm_arch == "armv8.2-a+dotprod"
    with pytest.raises(UserError, match="bad ARM architecture"):
        choose_flags("aarch64", None, None, "armv8-a; rm -rf /")


def test_print_only_json(cli_app, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPILOT_TOOLS_DIR", str(tmp_path))
    result = CliRunner().invoke(cli_app, ["build", "--print-only", "--json", "--tools", "llama-bench"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["built"] is False and data["cached"] is False
    configure, build = data["cmake_lines"]
    assert configure.startswith("cmake -S ") and "-DGGML_RPC=ON" in configure
    assert build.endswith("--target llama-bench")
    assert not (tmp_path / "native").exists()  # printing builds nothing


def test_print_only_cross(cli_app, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPILOT_TOOLS_DIR", str(tmp_path))
    result = CliRunner().invoke(cli_app, ["build", "--print-only", "--target", "aarch64"])
    assert result.exit_code == 0, result.output
    assert "-DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc" in result.stdout
    assert f"-DGGML_CPU_ARM_ARCH={CROSS_ARM_ARCH}" in result.stdout
    assert "qemu-aarch64-static" in result.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--target", "riscv"], "unknown build target 'riscv'"),
        (["--tools", "llama-cli,rm"], "unknown tool"),
        (["--jobs", "0"], "--jobs 0: out of range"),
        (["--target", "aarch64", "--arm-arch", "x86-64"], "bad ARM architecture"),
    ],
)
def test_bad_input_is_one_line_exit_2(cli_app, args, message):
    result = CliRunner().invoke(cli_app, ["build", "--print-only", *args])
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_missing_cmake_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPILOT_TOOLS_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no cmake, no compiler
    with pytest.raises(UserError, match="cmake not found: apt-get install cmake"):
        build_tools("native")
    with pytest.raises(UserError, match="pkg install cmake clang"):
        check_toolchain(choose_flags("native", None, None), termux=True)
    with pytest.raises(UserError, match="gcc-aarch64-linux-gnu"):
        build_tools("aarch64")
    assert os.listdir(tmp_path) == []
