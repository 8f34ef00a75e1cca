"""OpenCL devices (probe's `opencl[]`): what `clinfo` says about each, and ggml-opencl's verdict on it.

Live, `clinfo` runs as a child of its own session with a deadline and an output cap (commands.run_command):
a driver that crashes, hangs or floods is a reason ("clinfo crashed: SIGSEGV"), never this process's
crash. A device tree replays `commands/clinfo.txt` (design.md's snapshot name). llama.cpp's own list
(`--list-devices`, gpu_llama.py) names the device `GPUOpenCL` when its OpenCL backend is installed and takes
the device; that name is joined here by the device's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.device import commands
from edgepilot.device.clinfo import extension_names, parse_clinfo, size_bytes
from edgepilot.device.opencl_verdict import c_version, judge
from edgepilot.untrusted import valid_text

if TYPE_CHECKING:
    from edgepilot.device.gpu import VulkanDevice

CLINFO_SECONDS = 10.0  # clinfo loads every ICD; the Adreno one answers in well under a second
# the extensions ggml-opencl reads (the device's whole list is much longer)
WATCHED = (
    "cl_khr_fp16",
    "cl_khr_subgroups",
    "cl_intel_subgroups",
    "cl_khr_subgroup_shuffle",
    "cl_qcom_subgroup_shuffle",
    "cl_qcom_large_buffer",
    "cl_khr_integer_dot_product",
)
VERDICTS = ("supported", "not-supported", "unknown")
TERMUX_LIBRARY_PATH = "LD_LIBRARY_PATH=/vendor/lib64:$PREFIX/lib"


@dataclass
class OpenCLDevice:
    platform: str
    name: str  # CL_DEVICE_NAME: "QUALCOMM Adreno(TM) 750" (what llama.cpp's list shows as its description)
    vendor: str | None
    device_type: str | None  # "GPU"
    device_version: str | None  # "OpenCL 3.0 Adreno(TM) 750"
    driver_version: str | None  # "OpenCL 3.0 QUALCOMM build: commit unknown Compiler E031.45.02.06"
    opencl_c_version: str | None  # "3.0"
    global_mem_bytes: int | None
    max_alloc_bytes: int | None  # the largest single buffer: a larger weight cannot go to the device
    extensions: list[str] = field(default_factory=list)  # those of WATCHED the device has
    family: str = "other"  # adreno | intel | other
    adreno_generation: str | None = None  # 6xx | 7xx | 8xx | X1 | X2, as ggml-opencl's table has it
    adreno_model: str | None = None  # "750"
    compiler: str | None = None  # "E031.45.02.06"
    verdict: str = "unknown"  # supported | not-supported | unknown
    reasons: list[str] = field(default_factory=list)
    fast_types: list[str] = field(default_factory=list)  # weight types its kernels are fast for
    slower_types: list[str] = field(default_factory=list)  # run on it, slower; any other type: the CPU's
    recommended_quant: str | None = None  # "Q4_0": requantize to it (--pure) for this device
    llama_cpp_name: str | None = None  # "GPUOpenCL" when llama.cpp lists it


def to_device(raw: dict[str, str]) -> OpenCLDevice:
    name = valid_text(raw.get("name", "")) or "unknown"
    version = valid_text(raw.get("device_version", ""))
    driver = valid_text(raw.get("driver_version", "")) or None
    c_text = raw.get("opencl_c_version")
    cv = c_version(c_text)
    exts = set(extension_names(raw.get("extensions")))
    j = judge(name, version, c_text, driver, exts)
    verdict = {True: "supported", False: "not-supported", None: "unknown"}[j.supported]
    return OpenCLDevice(
        platform=valid_text(raw.get("platform", "")),
        name=name,
        vendor=valid_text(raw.get("vendor", "")) or None,
        device_type=valid_text(raw.get("device_type", "")) or None,
        device_version=version or None,
        driver_version=driver,
        opencl_c_version=f"{cv[0]}.{cv[1]}" if cv else None,
        global_mem_bytes=size_bytes(raw.get("global_mem")),
        max_alloc_bytes=size_bytes(raw.get("max_alloc")),
        extensions=[e for e in WATCHED if e in exts],
        family=j.family,
        adreno_generation=j.generation,
        adreno_model=j.model,
        compiler=j.compiler,
        verdict=verdict,
        reasons=j.reasons,
        fast_types=j.fast_types,
        slower_types=j.slower_types,
        recommended_quant=j.recommended_quant,
    )


def read_opencl(root: Path, android: bool) -> tuple[list[OpenCLDevice], list[str]]:
    """The OpenCL devices clinfo lists at `root` (live: run in a bounded child), and why there are none."""
    text, why = commands.run_command(root, ["clinfo"], timeout=CLINFO_SECONDS)
    if text is None:
        hint = (
            "; Termux: pkg install clinfo" if android and (why or "").startswith("command not found") else ""
        )
        return [], [f"no OpenCL device list ({why}){hint}"]
    raws, n_platforms = parse_clinfo(text)
    if n_platforms is None and not raws:
        return [], ["clinfo printed no 'Number of platforms' line: not clinfo's output"]
    devices = [to_device(r) for r in raws]
    if devices:
        return devices, []
    why = "clinfo lists no OpenCL platform" if not n_platforms else "clinfo lists no OpenCL device"
    if android:
        why += f" (Adreno under Termux: run it as `{TERMUX_LIBRARY_PATH} clinfo`, termux-packages#16852)"
    return [], [why]


def join_llama(devices: list[OpenCLDevice], listed: list[tuple[str, str]]) -> None:
    """Name each device llama.cpp lists (name, description: `GPUOpenCL`, the CL device name)."""
    left = list(listed)
    for dev in devices:
        match = next((x for x in left if x[1].strip() == dev.name.strip()), None)
        if match is None and len(left) == 1 and len(devices) == 1:
            match = left[0]  # one device on both sides
        if match is not None:
            dev.llama_cpp_name = match[0]
            left.remove(match)


def with_opencl(gpus: list[VulkanDevice], devices: list[OpenCLDevice]) -> None:
    """Join llama.cpp's OpenCL entries of probe's `gpus[]` with clinfo's devices: each side learns the
    other's name, the gpus[] entry the driver and ggml-opencl's reasons."""
    listed = [g for g in gpus if g.backend == "opencl" and g.llama_cpp_name]
    join_llama(devices, [(g.llama_cpp_name or "", g.llama_cpp_description or g.name) for g in listed])
    for dev in devices:
        gpu = next((g for g in listed if g.llama_cpp_name == dev.llama_cpp_name), None)
        if gpu is None or dev.llama_cpp_name is None:
            continue
        gpu.driver = gpu.driver or dev.compiler or dev.driver_version
        gpu.reasons += [f"ggml-opencl: {r}" for r in dev.reasons]


def usable(devices: list[OpenCLDevice]) -> OpenCLDevice | None:
    """The device ggml-opencl would pick: its first supported one (the first GPU of the first platform
    that has one, in ggml's own order)."""
    return next((d for d in devices if d.verdict == "supported"), None)
