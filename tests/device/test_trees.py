"""Probe every device tree under tests/devices and check the facts their SOURCE.md documents."""

from __future__ import annotations

import json

import pytest

from edgepilot.device.probe import probe
from edgepilot.jsonable import dumps, to_jsonable


def clusters(p):
    return [(c.cpus, c.max_mhz, c.core, c.kind) for c in p.cpu.clusters]


def test_every_tree_has_a_source_and_probes(devices):
    trees = sorted(d for d in devices.iterdir() if d.is_dir())
    assert len(trees) >= 8
    for tree in trees:
        assert (tree / "SOURCE.md").is_file(), tree.name
        data = json.loads(dumps(probe(tree)))
        for key in ("cpu", "memory", "android", "gpus", "thermal", "battery", "storage"):
            assert key in data, (tree.name, key)
        for key in ("arch", "userland_bits", "cores", "clusters", "features"):
            assert key in data["cpu"]
        for key in ("total_bytes", "available_bytes", "swap_total_bytes", "zram", "psi_some_avg10"):
            assert key in data["memory"]
        assert "cgroup_limit_bytes" in data["memory"]
        for cl in data["cpu"]["clusters"]:
            assert set(cl) >= {"cpus", "max_mhz", "core"}
        for gpu in data["gpus"]:
            assert set(gpu) >= {"name", "vendor", "api_version", "driver", "vulkan_usable", "reasons"}
        for zone in data["thermal"]:
            assert set(zone) >= {"zone", "celsius"}


def test_snapdragon_8_gen_2(devices):
    p = probe(devices / "sd8gen2-xiaomi13pro")
    assert (p.cpu.arch, p.cpu.userland_bits, p.cpu.cores) == ("aarch64", 64, 8)
    assert clusters(p) == [
        ([7], 3187, "Cortex-X3", "prime"),
        ([3, 4], 2803, "Cortex-A715", "performance"),
        ([5, 6], 2803, "Cortex-A710", "performance"),
        ([0, 1, 2], 2016, "Cortex-A510", "efficiency"),
    ]
    assert {"asimddp", "i8mm", "bf16", "asimdhp"} <= set(p.cpu.features)
    assert "sve" not in p.cpu.features
    # i8mm wins over dotprod in ggml's repack choice
    assert p.cpu.repack == {
        "Q4_0": "4x8",
        "Q4_K": "8x8",
        "Q5_K": "8x8",
        "Q6_K": "8x8",
        "IQ4_NL": "4x4",
        "MXFP4": "4x4",
        "Q8_0": "4x8",
        "Q1_0": "4x8",
    }
    assert p.cpu.big_cores == [3, 4, 5, 6, 7]
    a = p.android
    assert (a.sdk, a.model, a.soc) == (33, "2210132G", "QTI SM8550")
    assert (a.termux, a.termux_version, a.termux_apk_release) == (True, "0.118.1", "F_DROID")
    assert a.phantom_process_limit == 32
    assert p.memory.zram is True and p.memory.zram_bytes == 6291452 * 1024
    assert p.memory.psi_some_avg10 == 0.35
    assert p.gpus == [] and "command not found: vulkaninfo" in p.reasons["gpus"][0]
    assert p.thermal == [] and "permission denied: /sys/class/thermal" in p.reasons["thermal"][0]
    home, sdcard = p.storage.paths
    assert (home.fstype, home.slow) == ("f2fs", False)
    assert (sdcard.resolved, sdcard.fstype, sdcard.slow) == ("/storage/emulated/0", "fuse", True)


def test_exynos_990_mali_g77_vulkan_1_1_is_not_usable(devices):
    p = probe(devices / "exynos990-galaxy-s20")
    assert clusters(p) == [
        ([6, 7], 2730, "Exynos M5", "prime"),
        ([4, 5], 2500, "Cortex-A76", "performance"),
        ([0, 1, 2, 3], 2000, "Cortex-A55", "efficiency"),
    ]
    assert "asimddp" in p.cpu.features and "i8mm" not in p.cpu.features
    assert p.cpu.repack["Q4_0"] == "4x4"
    (gpu,) = p.gpus
    assert (gpu.name, gpu.vendor, gpu.api_version) == ("Mali-G77", "ARM", "1.1.213")
    assert gpu.vulkan_usable is False
    assert "apiVersion 1.1.213 < 1.2" in gpu.reasons[0] and "vkGetBufferDeviceAddress" in gpu.reasons[0]
    assert "llama.cpp#28593" in gpu.issues
    assert p.android.soc == "exynos990" and p.android.sdk == 33


def test_pixel_6a_mali_g78(devices):
    p = probe(devices / "pixel6a-tensor-g1")
    assert clusters(p) == [
        ([6, 7], 2802, "Cortex-X1", "prime"),
        ([4, 5], 2253, "Cortex-A76", "performance"),
        ([0, 1, 2, 3], 1803, "Cortex-A55", "efficiency"),
    ]
    assert p.cpu.clusters[0].scaling_max_mhz == 2348  # thermally capped
    (gpu,) = p.gpus
    assert (gpu.name, gpu.api_version, gpu.driver_version) == ("Mali-G78", "1.4.305", "54.3.0")
    assert gpu.driver.startswith("v1.r54p3")
    assert gpu.vulkan_usable is True
    assert [r.split(":")[0] for r in gpu.reasons] == ["caveat"] and gpu.issues == ["llama.cpp#22682"]
    a = p.android
    assert (a.soc, a.sdk, a.os_64bit) == ("Google Tensor", 36, True)
    assert a.phantom_process_limit is None and "disabled" in a.phantom_process_note
    b = p.battery
    assert (b.status, b.capacity_percent, b.current_ma, b.voltage_v, b.temp_c) == (
        "Discharging",
        64,
        -812.0,
        3.862,
        33.8,
    )
    assert b.watts == pytest.approx(3.14, abs=0.01) and b.plugged is False


def test_xperia_10_ii_mid_range_with_denied_and_missing_files(devices):
    p = probe(devices / "xperia10ii-sd665")
    assert p.cpu.hardware == "Qualcomm Technologies, Inc SM6125"
    assert p.cpu.model_name == "AArch64 Processor rev 4 (aarch64)"
    assert clusters(p) == [
        ([4, 5], 2016, "Kryo 2xx Gold (Cortex-A73 class)", "performance"),
        ([0, 1, 2, 3], 1805, "Kryo 2xx Silver (Cortex-A53 class)", "efficiency"),
        ([6, 7], None, None, "unknown"),
    ]
    assert p.cpu.online == [0, 1, 2, 3, 4, 5]
    assert any("offline: 6,7" in r for r in p.cpu.reasons)
    # no dotprod: none of ggml's ARM repacking applies
    assert "asimddp" not in p.cpu.features and p.cpu.repack == {}
    assert any("no dotprod" in m for m in p.cpu.missing)
    assert p.memory.psi_some_avg10 is None
    assert any("missing: /proc/pressure/memory" in r for r in p.memory.reasons)
    assert "permission denied: /sys/class/thermal" in p.reasons["thermal"][0]
    assert p.battery is None and "permission denied: /sys/class/power_supply" in p.reasons["battery"][0]
    assert p.android.sdk == 31 and p.android.phantom_process_limit == 32
    assert "termux-app#2366" in p.android.phantom_process_note


def test_32bit_termux_on_64bit_phone(devices):
    p = probe(devices / "redmi-note8-termux32")
    assert (p.cpu.arch, p.cpu.userland_bits, p.cpu.cpu_bits, p.cpu.isa) == ("armv8l", 32, 64, "arm32")
    assert p.cpu.features[:5] == ["half", "thumb", "fastmult", "vfp", "edsp"]
    assert p.cpu.repack == {} and any("AArch64-only" in m for m in p.cpu.missing)
    assert any("32-bit userland (armv8l) on a 64-bit CPU" in r for r in p.cpu.reasons)
    assert any("reinstall the arm64-v8a Termux" in r for r in p.cpu.reasons)
    assert [c.core for c in p.cpu.clusters] == [
        "Kryo 2xx Gold (Cortex-A73 class)",
        "Kryo 2xx Silver (Cortex-A53 class)",
    ]
    assert p.android.os_64bit is True and p.android.sdk == 30


def test_snapdragon_8_gen_3_with_adreno_750(devices):
    p = probe(devices / "sd8gen3-xiaomi14")
    assert clusters(p) == [
        ([7], 3302, "Cortex-X4", "prime"),
        ([2, 3, 4], 3149, "Cortex-A720", "performance"),
        ([5, 6], 2957, "Cortex-A720", "performance"),
        ([0, 1], 2266, "Cortex-A520", "efficiency"),
    ]
    assert (p.android.sdk, p.android.model, p.android.soc) == (34, "23127PN0CG", "QTI SM8650")
    (cl,) = p.opencl
    assert (cl.name, cl.adreno_generation, cl.compiler, cl.verdict) == (
        "QUALCOMM Adreno(TM) 750",
        "7xx",
        "E031.45.02.06",
        "supported",
    )


def test_snapdragon_8_elite_with_adreno_830(devices):
    p = probe(devices / "sd8elite-galaxy-s25plus")
    assert [(c.cpus, c.max_mhz, c.core) for c in p.cpu.clusters] == [
        ([6, 7], 4474, "Oryon"),
        ([0, 1, 2, 3, 4, 5], 3533, "Oryon"),
    ]
    assert (p.android.sdk, p.android.model, p.android.os_64bit) == (35, "SM-S936B", True)
    (cl,) = p.opencl
    assert (cl.name, cl.adreno_generation, cl.compiler, cl.verdict) == (
        "QUALCOMM Adreno(TM) 830",
        "8xx",
        "E031.47.18.42",
        "supported",
    )


def test_raspberry_pi_5(devices):
    p = probe(devices / "raspberry-pi5")
    assert clusters(p) == [([0, 1, 2, 3], 2400, "Cortex-A76", "uniform")]
    assert p.cpu.hardware == "BCM2835"
    assert p.cpu.repack == {
        "Q4_0": "4x4",
        "Q4_K": "8x4",
        "Q5_K": "8x4",
        "Q6_K": "8x4",
        "IQ4_NL": "4x4",
        "MXFP4": "4x4",
        "Q8_0": "4x4",
        "Q1_0": "4x4",
    }
    assert p.android is None
    assert p.memory.zram is False and p.memory.swap_total_bytes == 102396 * 1024
    assert p.memory.overcommit == "heuristic" and p.memory.swappiness == 60
    assert [(z.zone, z.type, z.celsius) for z in p.thermal] == [("thermal_zone0", "cpu-thermal", 57.4)]
    assert p.battery is None


def test_rk3588_board(devices):
    p = probe(devices / "rk3588-orangepi5plus")
    assert clusters(p) == [
        ([4, 5, 6, 7], 2400, "Cortex-A76", "performance"),
        ([0, 1, 2, 3], 1800, "Cortex-A55", "efficiency"),
    ]
    (gpu,) = p.gpus
    assert (gpu.name, gpu.api_version, gpu.driver_version, gpu.device_id) == (
        "Mali-G610",
        "1.1.305",
        "25.0.7",
        0xA8670000,
    )
    assert gpu.vulkan_usable is False
    assert {"llama.cpp#22682", "llama.cpp#17783", "llama.cpp#28593"} <= set(gpu.issues)
    assert p.memory.zram is True
    assert p.hottest.type == "bigcore0-thermal" and p.hottest.celsius == 47.1
    (cl,) = p.opencl  # Arm's libmali OpenCL: a GPU ggml-opencl drops
    assert (cl.name, cl.verdict) == ("Mali-G610 r0p0", "not-supported")


def test_x86_laptop(devices):
    p = probe(devices / "x86-laptop-i7-1165g7")
    assert p.cpu.isa == "x86_64" and p.cpu.cores == 8
    assert clusters(p) == [
        (list(range(8)), 4700, "11th Gen Intel(R) Core(TM) i7-1165G7 @ 2.80GHz", "uniform")
    ]
    assert {"avx2", "fma", "avx512f", "avx512_vnni"} <= set(p.cpu.simd)
    assert p.cpu.repack == {"Q4_0": "8x8", "Q4_K": "8x8", "IQ4_NL": "8x8", "MXFP4": "8x8", "Q2_K": "8x8"}
    assert p.memory.cgroup_limit_bytes == 12 << 30 and p.memory.cgroup_usage_bytes == 1 << 30
    assert p.memory.zram is False
    b = p.battery
    assert (b.name, b.status, b.plugged, b.watts) == ("BAT0", "Charging", True, 21.0)
    assert p.hottest.type == "x86_pkg_temp"


def test_qemu_user_emulation_is_not_mistaken_for_x86(devices):
    p = probe(devices / "qemu-aarch64-on-x86")
    assert (p.cpu.arch, p.cpu.userland_bits, p.cpu.isa) == ("aarch64", 64, "unknown")
    assert p.cpu.repack == {} and p.cpu.cpu_bits is None
    assert any("emulated (qemu-user?)" in r for r in p.cpu.reasons)


def test_json_is_plain(devices):
    data = to_jsonable(probe(devices / "sd8gen2-xiaomi13pro"))
    assert data["cpu"]["clusters"][0] == {
        "cpus": [7],
        "max_mhz": 3187,
        "core": "Cortex-X3",
        "kind": "prime",
        "scaling_max_mhz": None,
        "capacity": None,
    }
    assert data["android"]["termux"] is True
    json.dumps(data)
