"""llama.cpp's own device list (`llama-server --list-devices`) joined with vulkaninfo's facts, the full
vulkaninfo text's offload facts, and the verdicts, on device trees and snapshots."""

from __future__ import annotations

import shutil

from edgepilot.device.gpu import VulkanDevice, join
from edgepilot.device.gpu_details import parse_full
from edgepilot.device.gpu_llama import LlamaDevice, parse_list_devices
from edgepilot.device.gpu_verdict import final_verdict
from edgepilot.device.probe import probe
from edgepilot.device.snapshot import save

LAVAPIPE = "Available devices:\n  Vulkan0: llvmpipe (LLVM 22.1.8, 256 bits) (24105 MiB, 22545 MiB free)\n"
LIST_FILE = "commands/llama-server---list-devices.txt"


def test_the_list_of_devices_and_its_empty_form():
    (dev,) = parse_list_devices(LAVAPIPE)
    assert (dev.name, dev.description, dev.backend) == (
        "Vulkan0",
        "llvmpipe (LLVM 22.1.8, 256 bits)",
        "vulkan",
    )
    assert (dev.total_bytes, dev.free_bytes) == (24105 << 20, 22545 << 20)
    assert parse_list_devices("load_backend: loaded CPU backend\nAvailable devices:\n  (none)\n") == []
    assert parse_list_devices("error: unknown argument: --list-devices\n") is None


def test_several_backends_and_a_line_without_memory():
    text = (
        "Available devices:\n"
        "  Vulkan0: Adreno (TM) 750 (7602 MiB, 6000 MiB free)\n"
        "  GPUOpenCL: QUALCOMM Adreno(TM) 750 (0 MiB, 0 MiB free)\n"
        "  RPC[127.0.0.1:50052]: RPC[127.0.0.1:50052]\n"
        "main: exiting\n"
    )
    vk, cl, rpc = parse_list_devices(text)
    assert (vk.backend, cl.backend, rpc.backend) == ("vulkan", "opencl", "rpc")
    assert cl.name == "GPUOpenCL" and rpc.total_bytes is None and rpc.name == "RPC[127.0.0.1:50052]"


def test_a_hostile_list_is_bounded():
    text = "Available devices:\n" + "".join(
        f"  Vulkan{i}: {'x' * 5000} (1 MiB, 1 MiB free)\n" for i in range(99)
    )
    devices = parse_list_devices(text)
    assert len(devices) == 16 and all(len(d.description) <= 200 for d in devices)


FULL = """Device Properties and Extensions:
=================================
GPU0:
VkPhysicalDeviceProperties:
\tapiVersion = 1.4.354
VkPhysicalDeviceSubgroupProperties:
\tsubgroupSize                      = 8
VkPhysicalDeviceMemoryProperties:
=================================
memoryHeaps: count = 2
\tmemoryHeaps[0]:
\t\tsize   = 25276502016 (0x5e298d000) (23.54 GiB)
\t\tflags:
\t\t\tMEMORY_HEAP_DEVICE_LOCAL_BIT
\tmemoryHeaps[1]:
\t\tsize   = 1073741824 (0x40000000) (1.00 GiB)
\t\tflags:
\t\t\tNone
memoryTypes: count = 1
\t\tsize   = 5
VkPhysicalDeviceVulkan11Features:
\tstorageBuffer16BitAccess           = false
VkPhysicalDeviceVulkan12Features:
\tbufferDeviceAddress                                = true
GPU1:
\tsubgroupSize = 64
"""


def test_the_full_vulkaninfo_text_gives_bda_16bit_storage_subgroup_and_heaps():
    first, second = parse_full(FULL)
    assert (first.bda, first.storage16, first.subgroup_size) == (True, False, 8)
    assert first.heaps == [
        {"bytes": 25276502016, "device_local": True},
        {"bytes": 1 << 30, "device_local": False},
    ]
    assert (second.subgroup_size, second.bda, second.heaps) == (64, None, [])


def _vk(name, kind="INTEGRATED_GPU", usable=True):
    return VulkanDevice(name, None, None, None, kind, "1.3.0", None, None, None, None, usable)


def test_join_matches_by_name_and_keeps_what_only_one_side_lists():
    mali, cpu = _vk("Mali-G715"), _vk("llvmpipe (LLVM 22.1.8, 256 bits)", "CPU", False)
    listed = [LlamaDevice("Vulkan0", "Mali-G715", "vulkan", 1 << 30, 1 << 29)]
    got = join([mali, cpu], listed)
    assert [(g.name, g.llama_cpp_name) for g in got] == [("Mali-G715", "Vulkan0"), (cpu.name, None)]
    assert got[0].llama_total_bytes == 1 << 30 and got[0].verdict == "unknown"
    assert "GGML_VK_VISIBLE_DEVICES" in got[1].reasons[-1] and got[1].verdict == "slow-software"


def test_a_device_only_llama_cpp_lists_is_judged_by_its_name():
    (got,) = join([], [LlamaDevice("Vulkan0", "Adreno (TM) 830", "vulkan", None, None)])
    assert got.name == "Adreno (TM) 830" and got.verdict == "known-bad"
    assert any("#28635" in r for r in got.reasons)


def test_verdicts_follow_the_check_first():
    dev = _vk("Mali-G78")
    dev.check = {"ok": False, "outcome": "crashed"}
    assert final_verdict(dev) == "crashed"
    dev.check = {"ok": False, "outcome": "failed"}
    assert final_verdict(dev) == "failed"
    dev.check = {"ok": True, "outcome": "ok"}
    assert final_verdict(dev) == "usable"
    assert final_verdict(_vk("Mali-G78"), listed=False) == "not-listed"
    assert final_verdict(_vk("PowerVR D-Series DXT-48-1536", usable=False)) == "known-bad"


def _tree_with_list(devices, tmp_path, name, listing):
    tree = tmp_path / name
    shutil.copytree(devices / name, tree)
    (tree / LIST_FILE).write_text(listing)
    return tree


def test_a_tree_with_llama_cpps_list_joins_it_without_running_anything(devices, tmp_path):
    listing = "Available devices:\n  Vulkan0: Mali-G78 (5000 MiB, 3000 MiB free)\n"
    p = probe(_tree_with_list(devices, tmp_path, "pixel6a-tensor-g1", listing))
    (gpu,) = p.gpus
    assert (gpu.llama_cpp_name, gpu.backend, gpu.check) == ("Vulkan0", "vulkan", None)
    assert gpu.verdict == "unknown" and gpu.vulkan_usable is True  # a caveat only, and no check on a replay
    assert "gpus" not in p.reasons or not any("device list" in r for r in p.reasons["gpus"])


def test_the_old_mali_needs_the_fix_when_llama_cpp_lists_it(devices, tmp_path):
    """Device apiVersion 1.1 and nothing else against it: edgepilot's fixed build is what it takes."""
    listing = "Available devices:\n  Vulkan0: Mali-G77 (7000 MiB, 5000 MiB free)\n"
    (gpu,) = probe(_tree_with_list(devices, tmp_path, "exynos990-galaxy-s20", listing)).gpus
    assert (gpu.llama_cpp_name, gpu.verdict, gpu.vulkan_fix) == ("Vulkan0", "needs-fix", "needed")
    assert any("`edgepilot build --vulkan`" in r for r in gpu.reasons), gpu.reasons


def test_a_tree_without_the_list_says_so(devices):
    p = probe(devices / "exynos990-galaxy-s20")
    assert p.gpus[0].llama_cpp_name is None and p.gpus[0].verdict == "needs-fix"
    assert any(LIST_FILE in r for r in p.reasons["gpus"])


def test_snapshot_save_captures_the_list_and_replays_it(tmp_path):
    from gpukit import fake_tools

    server = fake_tools(tmp_path / "bin", "segv")
    result = save(tmp_path / "snap", llama_tool=server)
    assert (tmp_path / "snap" / LIST_FILE).read_text().startswith("Available devices:")
    assert [g.llama_cpp_name for g in result.probe.gpus] == ["Vulkan0"]
    replayed = probe(tmp_path / "snap")
    assert [(g.name, g.llama_cpp_name, g.verdict) for g in replayed.gpus] == [
        (g.name, g.llama_cpp_name, g.verdict) for g in result.probe.gpus
    ]
    assert (tmp_path / "bin" / "calls").exists() is False  # a snapshot lists devices, it never checks them


def test_a_device_named_by_llama_cpp_meets_the_blocklist_by_its_description():
    from edgepilot.device.gpu_verdict import known_blocking

    adreno = known_blocking("Adreno (TM) 740")
    assert adreno is not None and adreno.key == "adreno-proprietary"
    assert known_blocking("Turnip Adreno (TM) 740") is None  # Mesa's driver for the same GPU works
    assert known_blocking("llvmpipe (LLVM 22.1.8, 256 bits)") is None
