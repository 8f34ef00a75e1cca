"""Parsers and rules on real text fragments (sources in comments)."""

from __future__ import annotations

from edgepilot.device.android import parse_getprop
from edgepilot.device.cpu import parse_cpu_list
from edgepilot.device.cpu_parts import core_name
from edgepilot.device.cpuinfo import parse_cpuinfo
from edgepilot.device.gpu import VulkanDevice, parse_json, parse_summary, to_device
from edgepilot.device.gpu_verdict import judge, parse_version
from edgepilot.device.isa import summarize
from edgepilot.device.memory import parse_meminfo, parse_psi, parse_swaps
from edgepilot.device.storage import Mount, mount_for, parse_mounts
from edgepilot.device.thermal import to_celsius

# hrw/arm-socs-table#138 (Alcatel Idol 4, Snapdragon 617, kernel 3.10): one field block for all processors.
SD617 = """Processor : AArch64 Processor rev 4 (aarch64)
processor : 0
processor : 1
processor : 2
processor : 3
processor : 4
processor : 5
processor : 6
processor : 7
Features : fp asimd evtstrm aes pmull sha1 sha2 crc32
CPU implementer : 0x41
CPU architecture: 8
CPU variant : 0x0
CPU part : 0xd03
CPU revision : 4
Hardware : Qualcomm Technologies, Inc MSM8952
"""


def test_old_qualcomm_cpuinfo_shares_one_block():
    info = parse_cpuinfo(SD617)
    assert [c.index for c in info.cpus] == list(range(8))
    assert {c.part for c in info.cpus} == {0xD03}
    assert info.common_features() == ["fp", "asimd", "evtstrm", "aes", "pmull", "sha1", "sha2", "crc32"]
    assert info.machine["hardware"] == "Qualcomm Technologies, Inc MSM8952"
    assert info.machine["processor_name"] == "AArch64 Processor rev 4 (aarch64)"
    assert info.kind == "arm" and info.arm_architecture() == 8


def test_core_names():
    assert core_name(0x41, 0xD4E) == "Cortex-X3"
    assert core_name(0x41, 0xD80) == "Cortex-A520"
    assert core_name(0x41, 0xD82) == "Cortex-X4"
    assert core_name(0x51, 0x804) == "Kryo 4xx Gold (Cortex-A76 class)"
    assert core_name(0x53, 0x004) == "Exynos M5"
    assert core_name(0x41, 0xFFF) == "ARM part 0xfff"


def test_cpu_list():
    assert parse_cpu_list("0-3,6,8-9\n") == [0, 1, 2, 3, 6, 8, 9]
    assert parse_cpu_list("0\n") == [0]


def test_isa_rules_follow_ggml_repack():
    # Snapdragon 8 Gen 3 (hrw/arm-socs-table#98), a subset of its Features: i8mm + dotprod
    sd8g3 = parse_cpuinfo(
        "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid\n"
    ).common_features() + ["asimdrdm", "lrcpc", "dcpop", "asimddp", "asimdfhm", "i8mm", "bf16", "bti"]
    assert summarize("arm64", sd8g3).repack == {
        "Q4_0": "4x8",
        "Q4_K": "8x8",
        "Q5_K": "8x8",
        "Q6_K": "8x8",
        "IQ4_NL": "4x4",
        "MXFP4": "4x4",
        "Q8_0": "4x8",
        "Q1_0": "4x8",
    }
    # Snapdragon 625 (hrw/arm-socs-table#13): plain ARMv8.0, no dotprod
    sd625 = ["fp", "asimd", "evtstrm", "aes", "pmull", "sha1", "sha2", "crc32"]
    s = summarize("arm64", sd625)
    assert s.repack == {} and s.simd == ["neon"]
    assert summarize("x86_64", ["sse2", "avx"]).repack == {}
    avx2 = summarize("x86_64", ["avx", "avx2", "fma"])
    assert avx2.repack == {"Q4_0": "8x8", "Q4_K": "8x8", "IQ4_NL": "8x8", "MXFP4": "8x8"}


def test_meminfo_swaps_psi():
    mem = parse_meminfo("MemTotal:  24684084 kB\nMemAvailable:   23715032 kB\nHugePages_Total:  0\n")
    assert mem == {"MemTotal": 24684084 * 1024, "MemAvailable": 23715032 * 1024, "HugePages_Total": 0}
    swaps = parse_swaps(
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
        "/dev/block/zram0                        partition\t2097148\t\t974844\t\t-2\n"
        "/var/swap                               file\t\t102396\t\t0\t\t-2\n"
    )
    assert [(s.path, s.zram, s.size_bytes) for s in swaps] == [
        ("/dev/block/zram0", True, 2097148 * 1024),
        ("/var/swap", False, 102396 * 1024),
    ]
    psi = "some avg10=1.50 avg60=0.20 avg300=0.00 total=12\nfull avg10=0.25 avg60=0 avg300=0 total=3\n"
    assert parse_psi(psi) == {"some": 1.5, "full": 0.25}


def test_getprop():
    props = parse_getprop("[ro.build.version.sdk]: [33]\n[ro.product.model]: [Pixel 6a]\n[empty]: []\nx\n")
    assert props == {"ro.build.version.sdk": "33", "ro.product.model": "Pixel 6a", "empty": ""}


def test_mounts_longest_prefix_wins():
    # lines as in topjohnwu/Magisk#1543 (Android 9 sdcardfs) and fastfetch-cli/fastfetch#322
    mounts = parse_mounts(
        "/dev/block/dm-9 / erofs ro,seclabel 0 0\n"
        "/dev/block/dm-11 /data f2fs rw,lazytime 0 0\n"
        "/data/media /storage/emulated sdcardfs rw,nosuid,nodev,noexec,noatime,fsuid=1023 0 0\n"
        "/dev/sda1 /mnt/my\\040models exfat rw 0 0\n"
    )
    assert mount_for("/storage/emulated/0/Download/m.gguf", mounts).fstype == "sdcardfs"
    assert mount_for("/data/data/com.termux/files/home", mounts).fstype == "f2fs"
    assert mount_for("/datax", mounts).mount_point == "/"
    assert mount_for("/mnt/my models/a.gguf", mounts).fstype == "exfat"
    assert mount_for("/x", []) is None
    assert isinstance(mounts[0], Mount)


def test_thermal_units():
    assert to_celsius(45300) == 45.3
    assert to_celsius(45) == 45.0
    assert to_celsius(-274000) is None


# qualcomm-linux/meta-qcom#2681: Turnip on QCS6490 (Adreno 643)
TURNIP = """GPU0:
        apiVersion        = 1.3.318 (4206910)
        driverVersion     = 25.2.6 (104865798)
        vendorID          = 0x5143
        deviceID          = 0x6030500
        deviceType        = PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU
        deviceName        = Turnip Adreno (TM) 643
        pipelineCacheUUID = 6b19aaf7-8398-bb16-1af6-1f846d3bb264
"""

# LibreELEC/LibreELEC.tv#5884: Raspberry Pi 4, Mesa V3DV, old vulkaninfo number formats
RPI4 = """==========
VULKANINFO
==========

Vulkan Instance Version: 1.2.201


Devices:
========
GPU0:
        apiVersion         = 4198599 (1.1.199)
        driverVersion      = 88080388 (0x5400004)
        vendorID           = 0x14e4
        deviceType         = PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU
        deviceName         = V3D 4.2
"""


def test_vulkaninfo_summary_formats():
    blocks, instance = parse_summary(TURNIP)
    dev = to_device(blocks[0], instance)
    assert (dev.api_version, dev.driver_version, dev.vendor, dev.device_id) == (
        "1.3.318",
        "25.2.6",
        "Qualcomm",
        0x6030500,
    )
    assert dev.vulkan_usable is True  # Turnip: a caveat, not a block
    assert dev.issues == ["llama.cpp#25734"]
    blocks, instance = parse_summary(RPI4)
    assert instance == "1.2.201"
    dev = to_device(blocks[0], instance)
    assert (dev.name, dev.api_version, dev.vendor) == ("V3D 4.2", "1.1.199", "Broadcom")
    assert dev.vulkan_usable is False and "1.1.199 < 1.2" in dev.reasons[0]


def _dev(name, vendor_id, driver_name=None, driver_id=None, device_type="INTEGRATED_GPU"):
    return VulkanDevice(
        name, None, vendor_id, None, device_type, None, None, driver_id, driver_name, None, vulkan_usable=None
    )


def test_known_bad_pairs_from_llama_cpp_logs():
    # device/driver names as llama.cpp printed them: #19746 / #9452 (Adreno), #10406 (Mali-G715)
    adreno = _dev("Adreno (TM) 740", 0x5143, "Qualcomm Technologies Inc. Adreno Vulkan Driver")
    usable, reasons, refs = judge(adreno, (1, 3, 128), (1, 3, 0), None)
    assert usable is False and "llama.cpp#19746" in refs and "llama.cpp#12421" in refs
    g715 = _dev("Mali-G715", 0x13B5, "Mali-G715")
    usable, reasons, refs = judge(g715, (1, 3, 0), (1, 3, 0), None)
    assert usable is False and refs == ["llama.cpp#10406", "llama.cpp#23359"]
    soft = _dev("llvmpipe (LLVM 15.0.7, 128 bits)", 0x10005, device_type="CPU")
    assert judge(soft, (1, 3, 0), (1, 3, 0), None)[0] is False
    no16 = _dev("Some GPU", 0x1002)
    usable, reasons, _ = judge(no16, (1, 3, 0), (1, 3, 0), False)
    assert usable is False and "storageBuffer16BitAccess" in reasons[0]
    assert judge(_dev("Some GPU", 0x1002), None, None, None)[0] is None


def test_version_parsing():
    assert parse_version("1.4.305") == (1, 4, 305)
    assert parse_version("4198599 (1.1.199)") == (1, 1, 199)
    assert parse_version("4206910") == (1, 3, 318)
    assert parse_version(None) is None


def test_vkjson_devices():
    # a vkjson-shaped document (Android `cmd gpu vkjson`): packed integers, features in a nested object
    text = (
        '{"devices": [{"properties": {"apiVersion": 4198400, "driverVersion": 1, "vendorID": 5045, '
        '"deviceID": 1, "deviceType": 1, "deviceName": "Mali-G77"}, '
        '"core11": {"features": {"storageBuffer16BitAccess": 1}}}]}'
    )
    (raw,) = parse_json(text)
    dev = to_device(raw, None)
    assert dev.name == "Mali-G77" and dev.api_version == "1.1.0" and dev.vendor == "ARM"
    assert dev.storage_16bit is True and dev.vulkan_usable is False and dev.device_type == "INTEGRATED_GPU"
    assert parse_json("not json") == []
