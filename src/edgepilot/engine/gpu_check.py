"""The crash-isolated driver check: can llama.cpp create this GPU device, a buffer on it, and compute?

`llama-server --list-devices` loads the GPU backends and enumerates devices but creates no device and no
buffer, and exits 0 even on a driver that crashes at the first buffer (old Mali: NULL
vkGetBufferDeviceAddress -> SIGSEGV in ggml_vk_create_buffer). So the check runs one tiny offloaded run,
`llama-bench -dev Vulkan0 -ngl 2 -p 0 -n 1 -r 1` (or llama-completion `-n 1 -c 64`) on the bundled model, in a
child process of its own session with a deadline, stdin closed and output bounded. A driver that segfaults,
aborts or hangs there is a verdict ("the Vulkan driver crashed during the check: SIGSEGV"), never edgepilot's
crash: a hang kills the process group. The result is remembered per program, device and driver files
(gpu_cache.py).

The run path calls:
    llama_devices(tool)                     llama.cpp's devices (`--list-devices` in a child)
    check(tool, device, deadline)           the check (cached unless fresh=True)
    cached_check(tool, device)              what a previous check found, without running one
    cached_checks()                         every remembered check
    driver_kept_out_env()                   the environment that keeps GPU drivers out of a llama.cpp process
    run_env(tool)                           that environment when a remembered check of this llama.cpp failed
probe calls judge_gpus() to add each listed device's check and verdict.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgepilot.device.fs import LIVE_ROOT
from edgepilot.device.gpu_llama import LlamaDevice, backend_of, read_llama_devices
from edgepilot.engine import gpu_cache
from edgepilot.engine.gpu_run import RunResult, parse_facts, run_bounded
from edgepilot.engine.native_tools import ToolMissing, built_tool, find_tool, tool_version

if TYPE_CHECKING:
    from edgepilot.device.gpu import VulkanDevice

DEADLINE_S = 60.0  # lavapipe: ~3 s; a phone GPU compiles its first shaders, a few seconds more
# Two layers: with one, a model whose output shares the token embedding (Gemma) puts 0 bytes on the
# device; two put a repeating layer and its KV cache there (Gemma 3 270M on lavapipe: 3.8 MiB in 4.6 s;
# all layers: 47 s).
CHECK_LAYERS = 2
LIST_TOOLS = ("llama-server", "llama-cli", "llama-completion", "llama-bench")
CHECK_TOOLS = ("llama-bench", "llama-completion")
# What keeps every GPU driver out of a llama.cpp process (measured with Debian's vulkan-loader 1.4.363 and
# llama.cpp 0.7.0: with the first three the ICD library is never loaded and ggml registers no Vulkan backend).
# VK_ICD_FILENAMES is the name loaders before 1.3.207 read. GGML_VK_VISIBLE_DEVICES="" alone still loads the
# driver (instance and enumeration) but no device is created: kept for loaders that ignore the others
# (Android's system loader may).
NO_DRIVER_MANIFEST = "/nonexistent/edgepilot-no-vulkan-driver.json"
KEEP_OUT_ENV = {
    "VK_DRIVER_FILES": NO_DRIVER_MANIFEST,
    "VK_ICD_FILENAMES": NO_DRIVER_MANIFEST,
    "VK_LOADER_DRIVERS_DISABLE": "*",
    "GGML_VK_VISIBLE_DEVICES": "",
}


@dataclass
class DeviceCheck:
    """One driver check: probe's `gpus[].check{ok, outcome, seconds}` and what it found."""

    device: str  # "Vulkan0"
    description: str
    ok: bool | None  # None: not run
    outcome: str  # ok | crashed | hung | failed | not-run
    seconds: float
    detail: str  # one sentence: "the Vulkan driver crashed during the check: SIGSEGV"
    signal: str | None = None
    exit_code: int | None = None
    facts: dict[str, Any] = field(default_factory=dict)  # the ggml_vulkan line, buffer sizes
    evidence: list[str] = field(default_factory=list)  # the last lines it printed (a failed check)
    tool: str | None = None
    cached: bool = False
    checked_at: str | None = None

    def as_probe(self) -> dict[str, Any]:
        return asdict(self)


def list_tool() -> Path | None:
    """The llama.cpp program that lists devices: one edgepilot built (any of them: a `build --tools` subset is
    still that llama.cpp), else the one on PATH."""
    for name in LIST_TOOLS:
        path = built_tool(name)
        if path is not None:
            return path
    for name in LIST_TOOLS:
        try:
            return find_tool(name)
        except ToolMissing:
            continue
    return None


def check_tool(tool: Path | None = None) -> Path | None:
    """The program of the same llama.cpp that runs the check (llama-bench, else llama-completion)."""
    for name in CHECK_TOOLS:
        if tool is not None:
            sibling = tool if tool.name == name else tool.parent / name
            if sibling.is_file() and os.access(sibling, os.X_OK):
                return sibling
            continue
        try:
            return find_tool(name)
        except ToolMissing:
            continue
    return None


def llama_devices(tool: Path | None = None) -> list[LlamaDevice]:
    """llama.cpp's devices on this machine ([] when it lists none or cannot be asked)."""
    devices, _ = read_llama_devices(LIVE_ROOT, tool or list_tool())
    return devices or []


def _version(tool: Path) -> str | None:
    v = tool_version(tool)
    return v.text if v else None


def _named(device: LlamaDevice | str, tool: Path | None) -> LlamaDevice:
    """A device given by name alone, as llama.cpp lists it (its description is part of the cache key)."""
    if isinstance(device, LlamaDevice):
        return device
    listed = next((d for d in llama_devices(tool) if d.name == device), None)
    return listed or LlamaDevice(device, "", backend_of(device), None, None)


def _scope(checker: Path) -> str:
    return gpu_cache.scope(checker, _version(checker))


def cached_check(tool: Path | None, device: LlamaDevice | str) -> DeviceCheck | None:
    """What a previous check of this device with this llama.cpp and these driver files found."""
    checker = check_tool(tool)
    if checker is None:
        return None
    name = device.name if isinstance(device, LlamaDevice) else device
    described = device.description if isinstance(device, LlamaDevice) else None
    scope = _scope(checker)
    for entry in reversed(list(gpu_cache.load().values())):
        same = entry.get("scope") == scope and entry.get("device") == name
        if same and (described is None or entry.get("description") == described):
            return _from_entry(entry)
    return None


def cached_checks() -> list[DeviceCheck]:
    """Every remembered check, oldest first (whatever llama.cpp or driver it was for)."""
    return [c for c in (_from_entry(e) for e in gpu_cache.load().values()) if c is not None]


def _from_entry(entry: dict[str, Any]) -> DeviceCheck | None:
    names = DeviceCheck.__dataclass_fields__
    try:
        got = DeviceCheck(**{k: v for k, v in entry.items() if k in names})
    except TypeError:
        return None
    got.cached = True
    return got


def argv_for(checker: Path, device: str, model: Path) -> list[str]:
    common = ["-m", str(model), "-dev", device, "-ngl", str(CHECK_LAYERS)]
    if checker.name.startswith("llama-bench"):
        return [str(checker), *common, "-p", "0", "-n", "1", "-r", "1", "--no-warmup", "-v"]
    # llama-completion: -v prints the ggml_vulkan device line (llama-bench prints it anyway)
    return [str(checker), *common, "-n", "1", "-p", "Hi", "-c", "64", "-no-cnv", "--no-warmup", "-v"]


def _default_model() -> Path | None:
    from edgepilot.errors import UserError
    from edgepilot.gguf.resolve import bundled_model_path

    try:
        return bundled_model_path()
    except UserError:
        return None


def check(
    tool: Path | None,
    device: LlamaDevice | str,
    deadline: float = DEADLINE_S,
    model: Path | None = None,
    *,
    fresh: bool = False,
    progress: Callable[[str], None] | None = None,
) -> DeviceCheck:
    """Check one device in a child process (or return the remembered check unless fresh=True). Never raises
    for what the driver does; `tool` is any program of the llama.cpp to check (None: the installed one)."""
    dev = _named(device, tool)
    checker = check_tool(tool)
    if checker is None:
        return DeviceCheck(
            dev.name, dev.description, None, "not-run", 0.0, "no llama-bench or llama-completion"
        )
    scope = _scope(checker)
    key = gpu_cache.check_key(scope, dev.name, dev.description)
    if not fresh:
        entry = gpu_cache.load().get(key)
        found = _from_entry(entry) if entry else None
        if found is not None:
            return found
    model = model or _default_model()
    if model is None:
        detail = "no model to check with (the bundled model package is missing)"
        return DeviceCheck(dev.name, dev.description, None, "not-run", 0.0, detail, tool=str(checker))
    if progress is not None:
        what = f"{dev.name} ({dev.description})" if dev.description else dev.name
        progress(f"checking {what} with a 2-layer run in a child process (up to {deadline:g} s)")
    result = run_bounded(argv_for(checker, dev.name, model), deadline, _child_env())
    got = _judge(dev, result, deadline)
    got.tool = str(checker)
    got.checked_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if got.outcome != "not-run":
        entry = {k: v for k, v in asdict(got).items() if k != "cached"}
        why = gpu_cache.store(key, {**entry, "scope": scope})
        if why and progress is not None:
            progress(f"the check's result is not remembered: {why}")
    return got


def _child_env() -> dict[str, str]:
    # LLAMA_ARG_* would override the command line (LLAMA_ARG_DEVICE=none: not a GPU check at all)
    return {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}


def _backend_word(dev: LlamaDevice) -> str:
    return {"vulkan": "Vulkan", "opencl": "OpenCL"}.get(dev.backend, dev.backend)


def _judge(dev: LlamaDevice, r: RunResult, deadline: float) -> DeviceCheck:
    number = re.search(r"(\d+)$", dev.name)
    facts = parse_facts(r.kept, int(number.group(1)) if number else None)
    word = _backend_word(dev)
    base = {"facts": facts, "evidence": r.tail[-12:], "exit_code": r.returncode, "signal": r.signal}
    seconds = round(r.seconds, 2)
    if r.start_error is not None:
        return DeviceCheck(dev.name, dev.description, None, "not-run", 0.0, r.start_error)
    if r.hung:
        detail = f"the {word} driver hung during the check: no end after {deadline:g} s (killed)"
        return DeviceCheck(dev.name, dev.description, False, "hung", seconds, detail, **base)
    if r.signal is not None:
        detail = f"the {word} driver crashed during the check: {r.signal}"
        return DeviceCheck(dev.name, dev.description, False, "crashed", seconds, detail, **base)
    if r.returncode != 0:
        last = r.error_line or (r.tail[-1] if r.tail else "")
        detail = f"the check's {word} run exited with status {r.returncode}" + (f": {last}" if last else "")
        return DeviceCheck(dev.name, dev.description, False, "failed", seconds, detail[:400], **base)
    detail = f"created the device and a buffer, and computed on it in {seconds:g} s"
    return DeviceCheck(dev.name, dev.description, True, "ok", seconds, detail, **{**base, "evidence": []})


def driver_kept_out_env() -> dict[str, str]:
    """The environment that keeps GPU drivers from loading in a llama.cpp process (a CPU run that a
    crashing driver cannot touch): give it to every llama.cpp child after a failed check."""
    return dict(KEEP_OUT_ENV)


def checks_for(tool: Path | None = None) -> list[DeviceCheck]:
    """The remembered checks of this llama.cpp with this machine's current driver files and loader
    environment. Loads no driver (no device list): a few stat calls and one small file."""
    checker = check_tool(tool)
    if checker is None:
        return []
    scope = _scope(checker)
    out = [_from_entry(e) for e in gpu_cache.load().values() if e.get("scope") == scope]
    return [c for c in out if c is not None]


def failed_checks(tool: Path | None = None) -> list[DeviceCheck]:
    """The remembered failed checks of this llama.cpp (checks_for)."""
    return [c for c in checks_for(tool) if c.ok is False]


def run_env(tool: Path | None = None) -> dict[str, str]:
    """The environment for a llama.cpp child: driver_kept_out_env() when a check of one of its devices
    failed (crash, hang or error), else {}."""
    return driver_kept_out_env() if failed_checks(tool) else {}


def judge_gpus(
    gpus: list[VulkanDevice],
    tool: Path | None,
    run: bool = True,
    deadline: float = DEADLINE_S,
    progress: Callable[[str], None] | None = None,
) -> None:
    """probe on this machine: each device llama.cpp lists gets its check (remembered, else run when `run`)
    and the verdict that follows. A failed check marks the device unusable, with its reason."""
    from edgepilot.device.gpu_verdict import final_verdict

    for gpu in gpus:
        if gpu.llama_cpp_name is None:
            continue
        dev = LlamaDevice(
            gpu.llama_cpp_name,
            gpu.llama_cpp_description or "",
            gpu.backend or backend_of(gpu.llama_cpp_name),
            gpu.llama_total_bytes,
            gpu.llama_free_bytes,
        )
        found = check(tool, dev, deadline, progress=progress) if run else cached_check(tool, dev)
        if found is None:
            gpu.check = {
                "ok": None,
                "outcome": "not-run",
                "seconds": 0.0,
                "detail": "not checked (--no-gpu-check)",
            }
        else:
            gpu.check = found.as_probe()
            if found.ok is False:
                gpu.vulkan_usable = False
                gpu.reasons.append(found.detail)
        gpu.verdict = final_verdict(gpu, listed=True)
