"""`probe`: everything edgepilot needs to know about this device, as one dataclass (JSON keys: design.md).

probe(Path("/"))            the live machine
probe(Path("tree"))         a device tree (tests/devices/NAME or a saved snapshot directory)
probe(Path("snap.tar.gz"))  a saved snapshot archive (extracted safely to a temporary directory)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgepilot.device import fs
from edgepilot.device.android import AndroidFacts, read_android
from edgepilot.device.cpu import CpuFacts, read_cpu
from edgepilot.device.gpu import VulkanDevice, read_gpus
from edgepilot.device.gpu_llama import llama_devices_later
from edgepilot.device.memory import MemoryFacts, read_memory
from edgepilot.device.opencl import OpenCLDevice, read_opencl, with_opencl
from edgepilot.device.power import BatteryFacts, read_battery
from edgepilot.device.root_archive import open_root
from edgepilot.device.storage import StorageFacts, read_storage
from edgepilot.device.thermal import ThermalZone, hottest_cpu, read_thermal


@dataclass
class Probe:
    cpu: CpuFacts
    memory: MemoryFacts
    android: AndroidFacts | None
    gpus: list[VulkanDevice]
    thermal: list[ThermalZone]
    battery: BatteryFacts | None
    storage: StorageFacts
    env: dict[str, str]
    # Why a list/optional section is empty or incomplete ("gpus", "thermal", "battery", "env"); cpu, memory,
    # android and storage carry their own `reasons`. Nothing unreadable is dropped silently.
    reasons: dict[str, list[str]] = field(default_factory=dict)
    # The llama.cpp engine edgepilot would run here: {kind, path, version, ...} (engine/choice.py fills it for
    # this machine; None for a replayed device tree, whose programs are not here).
    engine: dict[str, Any] | None = None
    # This machine's memory read bandwidth as tuned/bandwidth_cache.py keeps it (None for a replayed tree).
    memory_bandwidth: dict[str, Any] | None = None
    # OpenCL devices as clinfo lists them, each with ggml-opencl's verdict (device/opencl.py); why none:
    # reasons["opencl"]
    opencl: list[OpenCLDevice] = field(default_factory=list)

    @property
    def hottest(self) -> ThermalZone | None:
        return hottest_cpu(self.thermal)


def probe(root: Path | str = fs.LIVE_ROOT, llama_tool: Path | str | None = None) -> Probe:
    """Probe the device at `root`. UserError only when `root` is not a usable directory or archive.
    `llama_tool`: the llama.cpp program whose `--list-devices` says what llama.cpp can offload to (live
    only; default llama-server on PATH). Nothing here loads a GPU driver beyond listing devices."""
    with open_root(Path(root)) as base:
        return _probe_dir(base, llama_tool)


def _probe_dir(root: Path, llama_tool: Path | str | None = None) -> Probe:
    live = fs.is_live(root)
    llama_list = llama_devices_later(root, llama_tool) if live else None
    env, env_reason = fs.read_env(root)
    cpu = read_cpu(root)
    memory = read_memory(root)
    android, _ = read_android(root, env)
    if android is not None and cpu.userland_bits == 32 and cpu.cpu_bits == 64:
        cpu.reasons.append(_bitness_fix(android))
    gpus, gpu_reasons = read_gpus(root, android is not None, llama_tool if live else None, llama_list)
    opencl, opencl_reasons = read_opencl(root, android is not None)
    with_opencl(gpus, opencl)
    thermal, thermal_reasons = read_thermal(root)
    battery, battery_reasons = read_battery(root)
    storage = read_storage(root, env, android is not None)
    # cpu, memory, storage and android keep their reasons inside their own objects.
    reasons = {
        "gpus": gpu_reasons,
        "opencl": opencl_reasons,
        "thermal": thermal_reasons,
        "battery": battery_reasons,
        "env": [env_reason] if env_reason else [],
    }
    return Probe(
        cpu=cpu,
        memory=memory,
        android=android,
        gpus=gpus,
        thermal=thermal,
        battery=battery,
        storage=storage,
        env=env,
        reasons={k: v for k, v in reasons.items() if v},
        opencl=opencl,
    )


def _bitness_fix(android: AndroidFacts) -> str:
    if android.os_64bit:
        abis = ",".join(android.abilist) or "arm64-v8a"
        return (
            f"Android itself is 64-bit (ABIs {abis}): this Termux is the 32-bit build; reinstall the "
            "arm64-v8a Termux APK (F-Droid or GitHub releases) to get a 64-bit userland"
        )
    if android.os_64bit is False:
        return "this Android build is 32-bit only: a 64-bit userland is not possible on this device"
    return "Android ABI list unknown: check `getprop ro.product.cpu.abilist` for arm64-v8a"
