"""The facts the offloaded plan's driver prior reads (device/gpu_driver.py): which physical device llama.cpp's
VulkanN is, its type and heaps, and the driver's libraries on disk (its ICD and the large libraries it links,
read from the ICD's ELF dynamic section)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from edgepilot.device.gpu import VulkanDevice
from edgepilot.device.gpu_driver import DriverFacts, driver_facts, dynamic_needed, ggml_order

MIB = 1 << 20
SUMMARY = """Vulkan Instance Version: 1.4.328

Devices:
========
GPU0:
\tapiVersion         = 1.4.318
\tdriverVersion      = 25.2.6
\tvendorID           = 0x10005
\tdeviceID           = 0x0000
\tdeviceType         = PHYSICAL_DEVICE_TYPE_CPU
\tdeviceName         = llvmpipe (LLVM 19.1.7, 256 bits)
\tdriverID           = DRIVER_ID_MESA_LLVMPIPE
\tdriverName         = llvmpipe
\tdriverInfo         = Mesa 25.2.6 (LLVM 19.1.7)
GPU1:
\tapiVersion         = 1.3.289
\tdeviceType         = PHYSICAL_DEVICE_TYPE_DISCRETE_GPU
\tdeviceName         = NVIDIA GeForce RTX 3060
\tdriverID           = DRIVER_ID_NVIDIA_PROPRIETARY
\tdriverName         = NVIDIA
"""
FULL = """Device Properties and Extensions:
==================================
GPU0:
\tmaxStorageBufferRange                            = 134217728
memoryHeaps: count = 1
\tmemoryHeaps[0]:
\t\tsize   = 25276502016 (0x5e298d000) (23.54 GiB)
\t\tflags:
\t\t\tMEMORY_HEAP_DEVICE_LOCAL_BIT
memoryTypes: count = 1
GPU1:
\tmaxStorageBufferRange                            = 4294967295
"""


def _device(name: str, kind: str) -> VulkanDevice:
    return VulkanDevice(name, None, None, None, kind, "1.3", None, None, None, None, True)


def test_vulkan_devices_are_numbered_as_ggml_picks_them():
    cpu, dgpu, igpu = (
        _device("llvmpipe", "CPU"),
        _device("RTX", "DISCRETE_GPU"),
        _device("UHD", "INTEGRATED_GPU"),
    )
    assert ggml_order([cpu, dgpu, igpu], None) == [dgpu, igpu]  # GPUs only, in the loader's order
    assert ggml_order([cpu], None) == []  # ggml skips a CPU device unless named
    assert ggml_order([cpu, dgpu], "0") == [cpu]
    assert ggml_order([cpu, dgpu], "1,0") == [dgpu, cpu]
    assert ggml_order([cpu], "") == []  # an empty list hides every device
    assert ggml_order([cpu, _device("virtio", "VIRTUAL_GPU")], None)[0].name == "virtio"


def test_the_needed_libraries_come_from_the_elf_dynamic_section():
    with open("/bin/ls", "rb") as f:
        assert "libc.so.6" in dynamic_needed(f)
    with open(__file__, "rb") as f:
        assert dynamic_needed(f) == []


def _tree(tmp_path: Path, visible: str | None) -> Path:
    (tmp_path / "commands").mkdir(parents=True)
    (tmp_path / "commands" / "vulkaninfo-summary.txt").write_text(SUMMARY)
    (tmp_path / "commands" / "vulkaninfo.txt").write_text(FULL)
    (tmp_path / "env.json").write_text(
        json.dumps({} if visible is None else {"GGML_VK_VISIBLE_DEVICES": visible})
    )
    icd = tmp_path / "usr/share/vulkan/icd.d"
    icd.mkdir(parents=True)
    for stem, lib in (("lvp", "libvulkan_lvp.so"), ("nouveau", "libvulkan_nouveau.so")):
        manifest = {"ICD": {"library_path": f"/usr/lib/x86_64-linux-gnu/{lib}", "api_version": "1.4.318"}}
        (icd / f"{stem}_icd.x86_64.json").write_text(json.dumps(manifest))
    libs = tmp_path / "usr/lib/x86_64-linux-gnu"
    libs.mkdir(parents=True)
    shutil.copy("/bin/ls", libs / "libvulkan_lvp.so")  # a real ELF: it needs libselinux.so.1 and libc.so.6
    for name, size in (
        ("libselinux.so.1", 120 * MIB),
        ("libc.so.6", 2 * MIB),
        ("libvulkan_nouveau.so", 9 * MIB),
    ):
        with open(libs / name, "wb") as f:
            f.truncate(size)  # sparse: only the size matters
    return tmp_path


def test_the_driver_of_vulkan0_with_its_compiler_library(tmp_path):
    with open("/bin/ls", "rb") as f:
        if "libselinux.so.1" not in dynamic_needed(f):
            pytest.skip("this host's ls does not link libselinux")
    facts = driver_facts(_tree(tmp_path, "0"), "Vulkan0")
    assert isinstance(facts, DriverFacts)
    assert facts.device_type == "CPU" and facts.driver == "DRIVER_ID_MESA_LLVMPIPE"
    assert facts.heaps == [{"bytes": 25276502016, "device_local": True}]
    assert facts.max_storage_range == 128 * MIB
    ls_size = os.path.getsize("/bin/ls")
    lib = "/usr/lib/x86_64-linux-gnu/"
    # the ICD named for this Mesa driver and the large library it links; libc is small and shared already
    assert facts.libraries == {f"{lib}libvulkan_lvp.so": ls_size, f"{lib}libselinux.so.1": 120 * MIB}


def test_without_visible_devices_vulkan0_is_the_gpu(tmp_path):
    facts = driver_facts(_tree(tmp_path, None), "Vulkan0")
    assert (
        facts is not None and facts.device_type == "DISCRETE_GPU" and facts.max_storage_range == (1 << 32) - 1
    )
    assert facts.libraries == {}  # no manifest of the NVIDIA driver in this tree
    assert driver_facts(_tree(tmp_path / "b", None), "Vulkan1") is None
    assert driver_facts(tmp_path, "GPUOpenCL") is None
