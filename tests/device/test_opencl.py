"""OpenCL devices from clinfo, judged by ggml-opencl's rules: the Adreno trees, a Mali, old and unknown
Adrenos from public clinfo outputs, hostile clinfo files, and clinfo as a bounded child (a program that
crashes, hangs or floods stands in for a bad ICD: no phone GPU here)."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from edgepilot.device import fs, opencl
from edgepilot.device.clinfo import parse_clinfo
from edgepilot.device.opencl import read_opencl
from edgepilot.device.opencl_verdict import compiler_version, generation
from edgepilot.device.probe import probe
from edgepilot.jsonable import dumps

ADRENO_750 = "sd8gen3-xiaomi14"
ADRENO_830 = "sd8elite-galaxy-s25plus"


def _line(label: str, value: str = "", indent: int = 2) -> str:
    return ((" " * indent + label).ljust(50) + value).rstrip()


def _clinfo(*devices: dict[str, str], platform: str = "QUALCOMM Snapdragon(TM)") -> str:
    """clinfo's layout (labels padded to column 50) around the facts of public clinfo outputs."""
    lines = [
        _line("Number of platforms", "1", 0),
        _line("Platform Name", platform),
        "",
        _line("Platform Name", platform),
    ]
    lines.append(_line("Number of devices", str(len(devices)), 0))
    for d in devices:
        lines += [_line(label, value) for label, value in d.items()]
    return "\n".join(lines) + "\n"


def _tree(tmp_path: Path, text: str | bytes) -> Path:
    (tmp_path / "commands").mkdir(parents=True, exist_ok=True)
    path = tmp_path / "commands" / "clinfo.txt"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return tmp_path


def test_the_adreno_750_tree(devices):
    p = probe(devices / ADRENO_750)
    (cl,) = p.opencl
    assert (cl.platform, cl.name, cl.device_type) == (
        "QUALCOMM Snapdragon(TM)",
        "QUALCOMM Adreno(TM) 750",
        "GPU",
    )
    assert (cl.opencl_c_version, cl.compiler, cl.adreno_generation, cl.adreno_model) == (
        "3.0",
        "E031.45.02.06",
        "7xx",
        "750",
    )
    assert cl.driver_version == "OpenCL 3.0 QUALCOMM build: commit unknown Compiler E031.45.02.06"
    assert (cl.global_mem_bytes, cl.max_alloc_bytes) == (5814714368, 1 << 30)
    assert {"cl_khr_fp16", "cl_khr_subgroups", "cl_qcom_subgroup_shuffle", "cl_qcom_large_buffer"} <= set(
        cl.extensions
    )
    assert cl.verdict == "supported" and cl.family == "adreno"
    assert (cl.fast_types, cl.recommended_quant) == (["Q4_0", "Q8_0", "Q4_1"], "Q4_0")
    assert "Q4_K" in cl.slower_types and "Q6_K" in cl.slower_types
    assert any("K-quant output matrix of 32768+ rows" in r for r in cl.reasons)  # A7X carve-outs
    assert "opencl" not in p.reasons


def test_the_adreno_830_tree(devices):
    (cl,) = probe(devices / ADRENO_830).opencl
    assert (cl.name, cl.compiler, cl.adreno_generation, cl.verdict) == (
        "QUALCOMM Adreno(TM) 830",
        "E031.47.18.42",
        "8xx",
        "supported",
    )
    assert cl.global_mem_bytes is None and cl.max_alloc_bytes == 1 << 30  # not in the public excerpt
    assert cl.reasons == []  # no 7xx carve-outs, a compiler ggml knows


def test_a_mali_is_not_supported_by_ggml_opencl(devices):
    (cl,) = probe(devices / "rk3588-orangepi5plus").opencl
    assert (cl.name, cl.family, cl.verdict, cl.opencl_c_version) == (
        "Mali-G610 r0p0",
        "other",
        "not-supported",
        "3.0",
    )
    assert (
        "Adreno and Intel GPUs only" in cl.reasons[0] and cl.fast_types == [] and cl.recommended_quant is None
    )


def test_an_old_adreno_compiler_is_too_old(tmp_path):
    """Adreno 640 (llama.cpp#2133's clinfo): compiler E031.37.12.01, older than E031.38.01 (PR #12886);
    its name has no model number, its version string has (ggml reads that first)."""
    driver = (
        "OpenCL 2.0 QUALCOMM build: commit #3dad7f8ed7 changeid #I593c16c433 Date: 10/01/21 Fri "
        "Local Branch:  Remote Branch: refs/tags/AU_LINUX_ANDROID_LA.UM.9.1.R1.11.00.00.604.073 "
        "Compiler E031.37.12.01"
    )
    text = _clinfo(
        {
            "Device Name": "QUALCOMM Adreno(TM)",
            "Device Version": "OpenCL 2.0 Adreno(TM) 640",
            "Driver Version": driver,
            "Device OpenCL C Version": "OpenCL C 2.0 Adreno(TM) 640",
        }
    )
    (cl,) = read_opencl(_tree(tmp_path, text), android=True)[0]
    assert (cl.driver_version, cl.compiler, cl.adreno_generation) == (driver, "E031.37.12.01", "6xx")
    assert cl.verdict == "not-supported" and cl.recommended_quant is None
    assert any("older than E031.38.01" in r and "#12886" in r for r in cl.reasons)


def test_an_adreno_ggml_has_no_generation_for_and_a_mesa_driver(tmp_path):
    """Adreno 735 (hashcat#4579): supported, but outside ggml's table; Mesa's rusticl on an Adreno 630
    (`FD630`, OpenCL C 1.2: KhronosGroup/khronosgroup.github.io#3) is neither Adreno by name nor 2.0."""
    text = _clinfo(
        {
            "Device Name": "QUALCOMM Adreno(TM) 735",
            "Device Version": "OpenCL 3.0 Adreno(TM) 735",
            "Device OpenCL C Version": "OpenCL C 3.0 Adreno(TM) 735",
            "Device Extensions": "cl_khr_fp16 cl_khr_subgroups cl_qcom_subgroup_shuffle",
        },
        {"Device Name": "FD630", "Device Version": "OpenCL 3.0", "Device OpenCL C Version": "OpenCL C 1.2"},
    )
    a735, fd630 = read_opencl(_tree(tmp_path, text), android=False)[0]
    assert (a735.verdict, a735.adreno_generation, a735.adreno_model) == ("supported", None, "735")
    assert any("not in ggml's generation table" in r for r in a735.reasons)
    assert any("names no compiler version" in r for r in a735.reasons)
    assert (fd630.family, fd630.verdict) == ("other", "not-supported")


def test_ggml_rules_for_compiler_strings_and_generations():
    assert compiler_version("OpenCL 3.0 QUALCOMM build: 0800.56.1 Compiler E031.47.18.42") == (
        "E031.47.18.42",
        (47, 18, 42),
    )
    assert compiler_version("OpenCL 3.0 QUALCOMM driver DX.17.75.00") == ("DX.17.75.00", (17, 75, 0))
    assert compiler_version("3.0") is None and compiler_version(None) is None
    assert generation("OpenCL 3.0 Adreno(TM) 740") == "7xx" and generation("QUALCOMM Adreno(TM) 840") == "8xx"
    assert (
        generation("Qualcomm(R) Adreno(TM) X1-85 GPU") == "X1"
        and generation("OpenCL 2.0 Adreno(TM) 505") is None
    )


def test_the_null_platform_section_names_no_new_device(devices):
    """clinfo's closing `NULL platform behavior` names the devices again (termux-packages#22500's output)."""
    text = (devices / ADRENO_750 / "commands" / "clinfo.txt").read_text()
    text += (
        "\nNULL platform behavior\n"
        + _line("clCreateContextFromType(NULL, CL_DEVICE_TYPE_GPU)", "Success (1)")
        + "\n"
        + _line("Platform Name", "clvk", 4)
        + "\n"
        + _line("Device Name", "Samsung Xclipse 940", 4)
        + "\n"
    )
    raws, n_platforms = parse_clinfo(text)
    assert n_platforms == 1 and [r["name"] for r in raws] == ["QUALCOMM Adreno(TM) 750"]


def test_no_platform_says_how_termux_finds_the_adreno_library(tmp_path):
    """termux-packages#16852: ocl-icd lists no platform for Adreno without /vendor/lib64 in
    LD_LIBRARY_PATH."""
    text = "Number of platforms                               0\n\nICD loader properties\n"
    devices, why = read_opencl(_tree(tmp_path, text), android=True)
    assert devices == [] and "no OpenCL platform" in why[0] and "LD_LIBRARY_PATH=/vendor/lib64" in why[0]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (os.urandom(4096), "not clinfo's output"),
        (b"x" * (2 << 20), "larger than 1 MiB"),
        (b"", "not clinfo's output"),
    ],
)
def test_a_hostile_clinfo_file_is_a_reason(tmp_path, content, expected):
    devices, why = read_opencl(_tree(tmp_path, content), android=True)
    assert devices == [] and expected in why[0]


def test_a_hostile_clinfo_is_bounded(tmp_path, cli_app):
    from click.testing import CliRunner

    device = {
        "Device Name": "Adreno" + "\u202e" * 3 + "x" * 2000,
        "Device Version": "OpenCL 3.0 Adreno(TM) 750",
        "Driver Version": "Compiler E031" + "9" * 3000,
        "Device OpenCL C Version": "OpenCL C 99999999999999999999.0",
        "Device Extensions": " ".join(f"cl_khr_fp16_{i}" for i in range(300)) + " cl_khr_fp16",
        "Global memory size": "9" * 5000,
    }
    found, _ = read_opencl(_tree(tmp_path, _clinfo(*[device] * 40)), android=False)
    assert len(found) == 16
    for d in found:
        assert len(d.name) <= 300 and len(d.driver_version or "") <= 300 and len(d.extensions) <= 7
    json.loads(dumps(found))
    shown = CliRunner().invoke(cli_app, ["probe", "--root", str(tmp_path)])
    assert shown.exit_code == 0
    assert "Adreno\\u202e" in shown.output and "\u202e" not in shown.output  # a bidi control is shown escaped


def test_a_fifo_clinfo_is_refused_without_blocking(tmp_path):
    (tmp_path / "commands").mkdir()
    os.mkfifo(tmp_path / "commands" / "clinfo.txt")
    devices, why = read_opencl(tmp_path, android=False)
    assert devices == [] and "not a regular file" in why[0]


def test_probe_and_fit_clis_stay_clean_on_a_hostile_clinfo(cli_app, devices, tmp_path, gemma_path):
    from click.testing import CliRunner

    tree = tmp_path / "tree"
    shutil.copytree(devices / ADRENO_750, tree)
    (tree / "commands" / "clinfo.txt").write_bytes(
        b"Number of devices 1\n  Device Name \xff\xfe" + os.urandom(2000)
    )
    runner = CliRunner()
    for args in (["probe", "--root", str(tree), "--json"], ["fit", str(gemma_path), "--root", str(tree)]):
        res = runner.invoke(cli_app, args)
        assert res.exit_code == 0 and res.exception is None, res.output


def _program(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


def test_live_clinfo_is_read(fake_bin, devices):
    saved = devices / ADRENO_750 / "commands" / "clinfo.txt"
    _program(fake_bin, "clinfo", f"cat '{saved}'\n")
    (cl,) = read_opencl(fs.LIVE_ROOT, android=True)[0]
    assert (cl.name, cl.verdict) == ("QUALCOMM Adreno(TM) 750", "supported")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("kill -SEGV $$\n", "clinfo crashed: SIGSEGV"),
        (
            "echo 'clGetPlatformIDs(-1001)' >&2; exit 1\n",
            "clinfo exited with status 1: clGetPlatformIDs(-1001)",
        ),
        ("exec yes 'Device Extensions cl_khr_fp16'\n", "output larger than 1 MiB: clinfo"),
        ("sleep 30 & sleep 30\n", "timed out after 2s: clinfo"),
    ],
)
def test_a_bad_icd_is_a_verdict_not_our_crash(fake_bin, monkeypatch, body, expected):
    """The ICD's crash, failure, flood or hang inside clinfo becomes the reason; the hung child and what it
    started are killed with their process group. (The deadline leaves a loaded machine time to start a
    shell: only the hang should meet it.)"""
    monkeypatch.setattr(opencl, "CLINFO_SECONDS", 2.0)
    _program(fake_bin, "clinfo", body)
    devices, why = read_opencl(fs.LIVE_ROOT, android=False)
    assert devices == [] and why == [f"no OpenCL device list ({expected})"]


def test_no_clinfo_on_termux_says_what_to_install(fake_bin, monkeypatch):
    monkeypatch.setenv("PATH", str(fake_bin))
    devices, why = read_opencl(fs.LIVE_ROOT, android=True)
    assert devices == [] and why == [
        "no OpenCL device list (command not found: clinfo); Termux: pkg install clinfo"
    ]


def test_probe_json_gains_the_opencl_devices(cli_app, devices):
    from click.testing import CliRunner

    res = CliRunner().invoke(cli_app, ["probe", "--root", str(devices / ADRENO_750), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert {"cpu", "memory", "android", "gpus", "thermal", "battery", "storage"} <= set(data)  # kept
    (cl,) = data["opencl"]
    assert set(cl) >= {
        "platform",
        "name",
        "device_version",
        "driver_version",
        "opencl_c_version",
        "extensions",
        "family",
        "adreno_generation",
        "compiler",
        "verdict",
        "reasons",
        "fast_types",
        "slower_types",
        "recommended_quant",
        "llama_cpp_name",
    }
    assert (cl["verdict"], cl["recommended_quant"]) == ("supported", "Q4_0")


def test_a_snapshot_keeps_clinfo_and_replays_the_same_devices(devices, tmp_path):
    from edgepilot.device.snapshot import save

    result = save(tmp_path / "snap", devices / ADRENO_750)
    assert (tmp_path / "snap" / "commands" / "clinfo.txt").is_file()
    assert (
        dumps(probe(tmp_path / "snap").opencl)
        == dumps(result.probe.opencl)
        == dumps(probe(devices / ADRENO_750).opencl)
    )
