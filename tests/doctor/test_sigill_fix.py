"""The doctor's fix for an illegal instruction is a build this CPU runs, never the native build that crashed.

The logs are llama.cpp's own `system_info` line (what the build was compiled with) after a SIGILL; the devices
are real trees (tests/devices): an Xperia 10 II (Snapdragon 665: Cortex-A73/A53, no dot product) and an
x86 laptop (Tiger Lake: AVX-512, no AMX).
"""

from __future__ import annotations

from doctorkit import DEVICES

from edgepilot.device.build_isa import beyond_portable, cmake_args
from edgepilot.doctor.diagnose import diagnose

ARM_BUILD = "system_info: n_threads = 4 / 8 | CPU : NEON = 1 | ARM_FMA = 1 | DOTPROD = 1 | MATMUL_INT8 = 1 |"
X86_NATIVE = (
    "system_info: n_threads = 4 / 8 | CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | "
    "BMI2 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 |"
)


def _illegal(lines: list[str], device: str):
    found = diagnose(lines, exit_code=132, root=DEVICES / device)
    first = found.causes[0]
    assert first.id == "illegal-instruction", found.causes
    return first


def test_an_arm_build_above_the_core_gets_the_cores_own_march():
    first = _illegal([ARM_BUILD, "Illegal instruction"], "xperia10ii-sd665")
    assert "not in this CPU's portable set: DOTPROD, MATMUL_INT8" in first.evidence
    assert "-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8-a" in first.fix
    assert "GGML_NATIVE=ON" not in first.fix


def test_a_native_x86_build_with_amx_gets_the_portable_set_not_native_again():
    first = _illegal([X86_NATIVE, "Illegal instruction (core dumped)"], "x86-laptop-i7-1165g7")
    assert any("AMX_INT8" in e for e in first.evidence)
    assert "-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON" in first.fix
    assert "GGML_NATIVE=ON" not in first.fix


def test_a_portable_build_that_still_faults_gets_kernels_picked_at_run_time():
    portable = "system_info: CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | REPACK = 1 |"
    first = _illegal([portable, "Illegal instruction"], "x86-laptop-i7-1165g7")
    assert "-DGGML_CPU_ALL_VARIANTS=ON -DGGML_BACKEND_DL=ON" in first.fix
    assert "GGML_NATIVE=ON" not in first.fix


def test_amx_listed_by_a_vm_is_still_beyond_the_portable_set():
    """A VM may list amx_int8 without granting its tiles (the issue's Xeon): a native build's AMX is named."""
    flags = ["sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "amx_int8", "amx_tile"]
    assert beyond_portable(["AVX2", "AVX512", "AMX_INT8", "REPACK"], flags) == ["AVX512", "AMX_INT8"]
    assert cmake_args("x86_64", flags) == (
        "-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
        "-DGGML_BMI2=ON"
    )
    assert cmake_args("x86_64", ["sse4_2", "avx"]).endswith(
        "-DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF"
    )
