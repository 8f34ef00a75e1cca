"""llama.cpp's OpenCL device (`GPUOpenCL`) on the same path as a Vulkan one: listed, joined with clinfo's
device, checked in a child, its buffers counted as the device's. No OpenCL GPU here: the listing line is
built as the vendored llama.cpp prints it (common/arg.cpp: `  %s: %s (%zu MiB, %zu MiB free)`; ggml-opencl
names every device GPUOpenCL, describes it by CL_DEVICE_NAME and reports its global memory, less 1 GiB as
free) with the Adreno 750's clinfo figures (5814714368 bytes: 5545 MiB, 4521 MiB free)."""

from __future__ import annotations

import shutil

import pytest
from gpukit import fake_tools

from edgepilot.device.gpu_llama import parse_list_devices
from edgepilot.device.probe import probe
from edgepilot.engine import gpu_check
from edgepilot.engine.load_log import DEVICE, EXTRA, backend_class, logged_buffers

LISTING = "Available devices:\n  GPUOpenCL: QUALCOMM Adreno(TM) 750 (5545 MiB, 4521 MiB free)\n"
MIB = 1 << 20


def test_the_opencl_line_is_listed_like_a_vulkan_one():
    (dev,) = parse_list_devices(LISTING)
    assert (dev.name, dev.description, dev.backend) == ("GPUOpenCL", "QUALCOMM Adreno(TM) 750", "opencl")
    assert (dev.total_bytes, dev.free_bytes) == (5545 * MIB, 4521 * MIB)


def test_a_tree_with_the_list_joins_clinfos_device(devices, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(devices / "sd8gen3-xiaomi14", tree)
    (tree / "commands" / "llama-server---list-devices.txt").write_text(LISTING)
    p = probe(tree)
    (gpu,) = p.gpus
    assert (gpu.llama_cpp_name, gpu.backend, gpu.driver) == ("GPUOpenCL", "opencl", "E031.45.02.06")
    assert gpu.llama_total_bytes == 5545 * MIB
    assert any(r.startswith("ggml-opencl: Adreno 7xx") for r in gpu.reasons)
    assert p.opencl[0].llama_cpp_name == "GPUOpenCL"


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path / "data"))


def test_bench_and_tune_check_it_as_they_check_vulkan(tmp_path, own_cache):
    """What bench/gpu_choice.devices_to_try does with the chosen llama.cpp: list, then check each device
    (stand-in programs: the listing above, a run that passes)."""
    server = fake_tools(tmp_path / "bin", "ok", listing=LISTING)
    (dev,) = gpu_check.llama_devices(server)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    got = gpu_check.check(server, dev, 30.0, model)
    assert (got.device, got.ok, got.outcome) == ("GPUOpenCL", True, "ok")
    call = (tmp_path / "bin" / "calls").read_text()
    assert "-dev GPUOpenCL -ngl 2" in call
    fake_tools(tmp_path / "bin2", "segv", listing=LISTING)
    crashed = gpu_check.check(tmp_path / "bin2" / "llama-server", dev, 30.0, model)
    assert crashed.detail == "the OpenCL driver crashed during the check: SIGSEGV"


def test_opencl_buffers_are_the_devices_not_the_cpus():
    """ggml-opencl's buffer type is `OpenCL` (no device number): its model buffer is no CPU extra buffer.
    The lines as the vendored llama.cpp formats them (src/llama.cpp, llama-model.cpp)."""
    log = [
        "llama_prepare_model_devices: using device GPUOpenCL (QUALCOMM Adreno(TM) 750) (unknown id) - "
        "4521 MiB free",
        "load_tensors:          CPU model buffer size =   170.00 MiB",
        "load_tensors:       OpenCL model buffer size =    90.00 MiB",
        "llama_kv_cache:     OpenCL KV buffer size =    18.00 MiB",
    ]
    got = logged_buffers(log)
    assert backend_class("OpenCL") == DEVICE and backend_class("AMX") == EXTRA
    assert got.extra_bytes == 0 and got.bytes_of(DEVICE, "model") == 90 * MIB
    assert got.devices == {"GPUOpenCL": "QUALCOMM Adreno(TM) 750"}
