"""GPU offload causes read from llama.cpp's Vulkan lines: a driver that killed llama.cpp, an offloaded run
killed for memory, a GPU slower than the CPU. The fix is the same command on the CPU, ready to paste."""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass

from edgepilot.doctor.command import shell_join
from edgepilot.doctor.evidence import Evidence
from edgepilot.doctor.logscan import quote
from edgepilot.doctor.rulekit import KILLED_LINE, SEGV
from edgepilot.doctor.types import Cause, cause
from edgepilot.doctor.vulkan_log import VulkanLog, read_vulkan

CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS}
KERNEL_SEGV = re.compile(r"segfault at [0-9a-f]+ ip [0-9a-f]+", re.I)
CRASH_TEXT = re.compile(rf"{SEGV.pattern}|{KERNEL_SEGV.pattern}|Aborted|SIGABRT|SIGBUS|Bus error", re.I)
VK_WORDS = re.compile(r"ggml_vulkan|libggml-vulkan|\bVulkan\d|vulkan\.\w+\.so|libvulkan", re.I)
LLAMA_CPP = re.compile(r"\bllama_|\bggml_|load_tensors|llama backend init", re.I)
BACKEND_LOAD = re.compile(r"llama backend init|load_backend:|ggml_backend_load", re.I)
_DEV = {"-dev", "--device"}
_NGL = {"-ngl", "--n-gpu-layers", "--gpu-layers"}
DRIVER_OFF = "VK_LOADER_DRIVERS_DISABLE='*'"  # Khronos loader 1.4; or VK_DRIVER_FILES=/nonexistent.json
LAST_LINES = 2


@dataclass
class GpuRun:
    """What the evidence says about the GPU side of one llama.cpp run."""

    vk: VulkanLog
    device_flag: str | None  # the value of -dev/--device on the command line
    ngl_flag: str | None
    reasons: list[str]  # why Vulkan was in play (empty: no sign of it)

    @property
    def cpu_only_asked(self) -> bool:
        return (self.device_flag or "").lower() == "none"


def _flag(argv: list[str] | None, names: set[str]) -> str | None:
    value = None
    for i, arg in enumerate(argv or []):
        flag, _, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if flag in names:
            value = inline or (argv[i + 1] if argv is not None and i + 1 < len(argv) else None)
    return value


def gpu_run(ev: Evidence) -> GpuRun:
    cached = ev.__dict__.get("_gpu_run")
    if isinstance(cached, GpuRun):
        return cached
    vk = read_vulkan(ev.lines)
    dev, ngl = _flag(ev.command, _DEV), _flag(ev.command, _NGL)
    reasons: list[str] = [d.line for d in vk.devices[:1]] + vk.using[:1]
    if not reasons and (line := ev.grep(VK_WORDS, limit=1)):
        reasons += line
    if dev and dev.lower().startswith("vulkan"):
        reasons.append(f"the command asks for the GPU: -dev {dev}")
    elif ngl is not None and (dev or "").lower() != "none":
        reasons.append(f"the command offloads layers (-ngl {ngl}; even -ngl 0 sends large batches to a GPU)")
    for gpu in ev.probe.gpus if ev.probe is not None else []:
        api = f", Vulkan {gpu.api_version}" if gpu.api_version else ""
        reasons.append(f"this device's Vulkan GPU: {gpu.name}{api} (driver {gpu.driver or '?'})")
    found = GpuRun(vk, dev, ngl, list(dict.fromkeys(reasons)))
    ev.__dict__["_gpu_run"] = found
    return found


def crashed(ev: Evidence) -> bool:
    if ev.signal is not None:
        return ev.signal in CRASH_SIGNALS
    return ev.exit_code is None and ev.has(CRASH_TEXT)


def died_loading_backends(ev: Evidence) -> bool:
    """The last line is llama.cpp loading its backends: loading libggml-vulkan.so enumerates the devices."""
    printed = [ln for ln in ev.lines if ln.strip() and not CRASH_TEXT.search(ln)]
    return bool(printed) and bool(BACKEND_LOAD.search(printed[-1]))


def last_lines(ev: Evidence, n: int = LAST_LINES) -> list[str]:
    """The last lines the program printed before it died (a kernel or shell crash line excluded)."""
    out = [quote(ln) for ln in ev.lines if ln.strip() and not CRASH_TEXT.search(ln)]
    return [f"last line: {ln}" for ln in out[-n:]]


def cpu_command(ev: Evidence) -> str:
    """The user's command with the GPU off (`-dev none -ngl 0`), or the flags when there is none."""
    argv = ev.command
    if not argv:
        return "`-dev none -ngl 0` (llama.cpp) or `edgepilot run --device none`"
    prog = os.path.basename(argv[0])
    if prog == "edgepilot" or argv[1:3] == ["-m", "edgepilot"]:
        return f"`{shell_join(_without(argv, _DEV | _NGL) + ['--device', 'none'])}`"
    return f"`{shell_join(_without(argv, _DEV | _NGL) + ['-dev', 'none', '-ngl', '0'])}`"


def _without(argv: list[str], names: set[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        flag = arg.split("=", 1)[0] if arg.startswith("--") else arg
        if i > 0 and flag in names:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


def driver_off_command(ev: Evidence) -> str:
    cmd = shell_join(ev.command) if ev.command else "CMD"
    return f"`{DRIVER_OFF} {cmd}`"


def vulkan_driver_crash(ev: Evidence) -> list[Cause]:
    if not crashed(ev):
        return []
    g = gpu_run(ev)
    if not g.reasons:
        return []
    evidence = [ev.status_line() or "", *ev.grep(KERNEL_SEGV, limit=1), *g.reasons[:2], *last_lines(ev)]
    if g.cpu_only_asked or died_loading_backends(ev):
        # -dev none does not keep the driver out: loading libggml-vulkan.so enumerates the devices anyway
        why = "-dev none was given" if g.cpu_only_asked else "it died while llama.cpp loaded its backends"
        evidence.append(f"{why}: the driver crashed as the Vulkan backend was loaded")
        fix = (
            f"keep the Vulkan driver from loading at all: {driver_off_command(ev)} "
            "(or VK_DRIVER_FILES=/nonexistent.json; Android's own loader may ignore both: then use a "
            "llama.cpp without libggml-vulkan.so)"
        )
        return [cause("vulkan-driver-crash", 80, evidence, fix)]
    if g.vk.devices or g.vk.using or (g.device_flag or "").lower().startswith("vulkan"):
        score = 80  # the log or the command puts the run on a Vulkan device
    elif g.ngl_flag is not None or ev.has(VK_WORDS):
        score = 65
    elif ev.has(LLAMA_CPP) or (ev.cmd is not None and ev.cmd.tool == "llama.cpp"):
        score = 45  # only the device has a Vulkan GPU: llama.cpp loads its driver whatever -ngl says
    else:
        return []
    fix = (
        f"run on the CPU: {cpu_command(ev)}; if that still crashes, keep the driver from loading: "
        f"{driver_off_command(ev)}"
    )
    return [cause("vulkan-driver-crash", score, evidence, fix)]


def _layers_hint(vk: VulkanLog, ev: Evidence) -> str:
    layers = vk.offloaded_layers
    if layers and layers[0] > 1:
        fewer = layers[0] // 2
        if ev.command:
            argv = _without(ev.command, _NGL) + ["-ngl", str(fewer)]
            return f"offload fewer layers: `{shell_join(argv)}`"
        return f"offload fewer layers (`-ngl {fewer}` of {layers[1]})"
    return "offload fewer layers (a lower `-ngl`)"


def offloaded_run_killed(ev: Evidence) -> list[Cause]:
    """SIGKILL (lmkd, the OOM killer) of a run that had put buffers on a GPU: on a phone, the same RAM."""
    if not (ev.killed or ev.has(KILLED_LINE) or (ev.run and ev.run.cgroup.get("oom_kill"))):
        return []
    vk = gpu_run(ev).vk
    gpu = vk.gpu_buffers()
    if not gpu and not vk.breakdown:
        return []
    by_device: dict[str, list[str]] = {}
    for b in gpu:
        by_device.setdefault(b.device, []).append(f"{b.kind} {b.mib:.0f} MiB")
    evidence = [f"on {d}: {', '.join(parts)}" for d, parts in by_device.items()]
    evidence += [f"{r.device} ({r.name}): self {r.self_mib} MiB = model {r.model} + context {r.context} + "
                 f"compute {r.compute}" for r in vk.breakdown[-1:]]  # fmt: skip
    evidence += [vk.offloaded] if vk.offloaded else []
    fix = (
        "the GPU's buffers are RAM on a phone (UMA) and count against lmkd, and offloaded weights are "
        f"copied, not mapped: {_layers_hint(vk, ev)}, or run on the CPU: {cpu_command(ev)}"
    )
    return [cause("killed-by-system", 96, evidence, fix)]


def _phase(test: str) -> str:
    return "prompt" if test.startswith("pp") else "generation" if test.startswith("tg") else test


def gpu_slower_than_cpu(ev: Evidence) -> list[Cause]:
    """llama-bench rows that ran the same test on the CPU (dev none or -ngl 0) and on a GPU."""
    cpu: dict[str, tuple[float, str]] = {}
    gpu: dict[str, tuple[float, str, str]] = {}
    for c in gpu_run(ev).vk.bench:
        on_cpu = c.dev.lower() == "none" or (not c.dev and c.ngl == 0)
        if on_cpu:
            if c.tps > cpu.get(c.test, (0.0, ""))[0]:
                cpu[c.test] = (c.tps, c.line)
        elif c.tps > gpu.get(c.test, (0.0, "", ""))[0]:
            gpu[c.test] = (c.tps, c.line, c.dev or f"-ngl {c.ngl}")
    slower = [t for t in cpu if t in gpu and gpu[t][0] < 0.9 * cpu[t][0]]
    if not slower:
        return []
    evidence = [
        f"{_phase(t)} ({t}): CPU {cpu[t][0]:.1f} t/s, {gpu[t][2]} {gpu[t][0]:.1f} t/s" for t in slower
    ]
    evidence += [cpu[slower[0]][1], gpu[slower[0]][1]]
    every = len(slower) == len([t for t in cpu if t in gpu])
    fix = (
        f"stay on the CPU{'' if every else ' for ' + ', '.join(_phase(t) for t in slower)}: "
        "`-dev none` (llama.cpp) or `edgepilot run --device none`; "
        "`edgepilot tune MODEL` measures both and keeps the faster per phase"
    )
    return [cause("gpu-slower-than-cpu", 75, evidence, fix)]


RULES = (vulkan_driver_crash, offloaded_run_killed, gpu_slower_than_cpu)
