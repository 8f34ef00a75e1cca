"""GPU causes: Vulkan too old, a NULL Vulkan function, a lost device, an unsupported OpenCL GPU or NNAPI."""

from __future__ import annotations

import re
import signal

from edgepilot.device.gpu_verdict import FIX_COMMAND
from edgepilot.doctor import rules_gpu
from edgepilot.doctor.evidence import Evidence
from edgepilot.doctor.rulekit import SEGV
from edgepilot.doctor.rules_gpu import cpu_command, crashed, died_loading_backends, gpu_run
from edgepilot.doctor.types import Cause, cause

CPU_INSTEAD = "run on the CPU instead: `-ngl 0 --device none` (llama.cpp), which on phones is usually as fast"
VK_TOO_OLD = re.compile(r"Vulkan 1\.2 required", re.I)
VK_BUFFER_PATH = re.compile(r"ggml_vk_create_buffer|getBufferAddress|vkGetBufferDeviceAddress", re.I)
NULL_PC = re.compile(
    r"#00 (pc )?0x?0{8,16}\b|fault addr 0x0\b|pc 0000000000000000|segfault at 0 ip 0{8,16}\b", re.I
)
VK_MENTION = re.compile(r"ggml_vulkan|libggml-vulkan|Vulkan\d", re.I)
DEVICE_LOST = re.compile(r"DeviceLost|ERROR_DEVICE_LOST|ErrorDeviceLost|device lost", re.I)
OPENCL_UNSUPPORTED = re.compile(
    r"ggml_opencl: unsupported GPU|drop unsupported device|Unsupported Adreno GPU", re.I
)
NNAPI = re.compile(
    r"not delegated to NNAPI|nnapi_delegate|NNAPI.{0,60}(not supported|failed|slower|fall ?back)", re.I
)
NO_GPU = re.compile(r"no usable GPU found", re.I)


def _parse_api(text: str | None) -> tuple[int, int] | None:
    m = re.search(r"(?<!\d)(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def _gpu_facts(ev: Evidence, want: str) -> list[str]:
    """Probe lines about the GPUs: want="old" (apiVersion < 1.2) or "issues" (known-bad driver notes)."""
    out: list[str] = []
    for gpu in ev.probe.gpus if ev.probe is not None else []:
        api = _parse_api(gpu.api_version)
        if want == "old" and api is not None and api < (1, 2):
            out.append(f"{gpu.name}: Vulkan apiVersion {gpu.api_version} (driver {gpu.driver or '?'})")
        if want == "issues":
            out += [f"{gpu.name}: {r}" for r in gpu.reasons if r.startswith(("known bad", "caveat"))]
    return out


def _old_api(ev: Evidence) -> list[str]:
    """Devices below Vulkan 1.2: from the probe, and from vulkaninfo output in the log."""
    logged = [f"{a.name or 'GPU'}: {a.line} (below 1.2)" for a in gpu_run(ev).vk.old_api()]
    return _gpu_facts(ev, "old") + logged


def _vulkan_seen(ev: Evidence) -> bool:
    return ev.has(VK_MENTION) or bool(gpu_run(ev).reasons)


def vulkan_api_too_old(ev: Evidence) -> list[Cause]:
    lines = ev.grep(VK_TOO_OLD, limit=2)
    if lines:
        evidence = lines + ev.grep(NO_GPU, limit=1) + _gpu_facts(ev, "old")
        fix = (
            f"{CPU_INSTEAD}; the Vulkan loader or driver reports a version below 1.2: in Termux install a "
            "newer loader (`pkg install vulkan-loader-generic`, the Khronos one), or "
            f"`{FIX_COMMAND}` (edgepilot's fix accepts a Vulkan 1.1 loader)"
        )
        return [cause("vulkan-api-too-old", 95, evidence, fix)]
    old = _old_api(ev)
    if not (old and crashed(ev) and _vulkan_seen(ev)) or died_loading_backends(ev):
        return []
    g = gpu_run(ev)
    evidence = [*old, *[d.line for d in g.vk.devices[:1]], ev.status_line() or ""]
    fix = (
        f"run on the CPU: {cpu_command(ev)}; llama.cpp checks only the loader's Vulkan version (1.2+), not "
        "the device's, and calls 1.2 functions this driver does not have; to use the GPU: "
        f"`{FIX_COMMAND}` builds llama.cpp with edgepilot's old-Mali fix"
    )
    return [cause("vulkan-api-too-old", 82, evidence, fix)]


def vulkan_null_function(ev: Evidence) -> list[Cause]:
    path = ev.grep(VK_BUFFER_PATH, limit=2)
    null_pc = ev.grep(NULL_PC, limit=1)
    segv = ev.signal == signal.SIGSEGV or (ev.signal is None and ev.has(SEGV))
    old = _old_api(ev)
    if path and (null_pc or segv):
        score = 95
    elif null_pc and _vulkan_seen(ev):
        score = 90
    elif segv and old and _vulkan_seen(ev) and not died_loading_backends(ev):
        score = 85
    elif old and not ev.lines:
        score = 30  # a device fact only: the first Vulkan buffer will crash here
    else:
        return []
    evidence = null_pc + path + old + [d.line for d in gpu_run(ev).vk.devices[:1]]
    if ev.signal == signal.SIGSEGV:
        evidence.insert(0, ev.status_line() or "")
    first = cpu_command(ev) if ev.lines else "`-ngl 0 --device none` (llama.cpp)"
    fix = (
        f"run on the CPU: {first}; the driver's Vulkan is older than 1.2 yet llama.cpp calls "
        "vkGetBufferDeviceAddress, which it returns as NULL (whisper.cpp #3590, llama.cpp PR #28593); "
        f"to use the GPU: `{FIX_COMMAND}` builds llama.cpp with edgepilot's old-Mali fix"
    )
    return [cause("vulkan-null-function", score, evidence, fix)]


def vulkan_device_lost(ev: Evidence) -> list[Cause]:
    lines = ev.grep(DEVICE_LOST, limit=2)
    if not lines:
        return []
    evidence = lines + ev.grep(r"ggml_vulkan: \d+ = ", limit=1) + _gpu_facts(ev, "issues")
    fix = (
        f"{CPU_INSTEAD}; to keep the GPU try smaller batches (`-b 32 -ub 32`, Adreno #12139) and "
        "`GGML_VK_DISABLE_F16=1`; Mali-G715 (#10406) and Qualcomm's Adreno driver are known to lose the "
        "device"
    )
    return [cause("vulkan-device-lost", 90, evidence, fix)]


def accelerator_unsupported(ev: Evidence) -> list[Cause]:
    opencl = ev.grep(OPENCL_UNSUPPORTED, limit=2)
    nnapi = ev.grep(NNAPI, limit=2)
    if not opencl and not nnapi:
        return []
    evidence = opencl + nnapi + ev.grep(NO_GPU, limit=1)
    parts = []
    if opencl:
        parts.append(
            "llama.cpp's OpenCL backend supports Qualcomm Adreno (and Intel) GPUs only: this GPU is dropped; "
            "use the CPU (`-ngl 0`), usually faster on phones anyway"
        )
    if nnapi:
        parts.append(
            "NNAPI delegates only the ops it knows and runs the rest on the CPU with a copy at every "
            "boundary (NNAPI is deprecated since Android 15): run without the NNAPI delegate on the CPU, "
            "e.g. "
            "llama.cpp's `llama-cli -m MODEL.gguf -ngl 0`"
        )
    return [cause("accelerator-unsupported", 85, evidence, "; ".join(parts))]


RULES = (
    vulkan_api_too_old,
    vulkan_null_function,
    vulkan_device_lost,
    accelerator_unsupported,
    *rules_gpu.RULES,
)
