"""The crash-isolated driver check: can llama.cpp create this GPU device, a buffer on it, and compute?

`llama-server --list-devices` loads the GPU backends and enumerates devices but creates no device and no
buffer, and exits 0 even on a driver that crashes at the first buffer (old Mali: NULL
vkGetBufferDeviceAddress -> SIGSEGV in ggml_vk_create_buffer). So the check runs one tiny offloaded run,
`llama-bench -dev Vulkan0 -ngl 2 -p 0 -n 1 -r 1` (or llama-completion `-n 1 -c 64`) on the bundled model, in a
child process of its own session with a deadline, stdin closed and output bounded. A driver that segfaults,
aborts or hangs there is a verdict ("the Vulkan driver crashed during the check: SIGSEGV"), never edgepilot's
crash: a hang kills the process group. The result is remembered per program, device and driver files
(gpu_cache.py).

A check that runs past its deadline while still using CPU (a driver compiling its pipelines) is `slow`, one
that used none is `hung`: either is run once more with a longer deadline and never remembered as final
(engine/checked_run.py); tune and `probe --check-gpu` check them again.

The run path calls:
    llama_devices(tool)                     llama.cpp's devices (`--list-devices` in a child)
    check(tool, device, deadline)           the check (remembered unless fresh=True or a timeout)
    cached_check(tool, device)              what a previous check found, without running one
    cached_checks()                         every remembered check
    driver_kept_out_env()                   the environment that keeps GPU drivers out of a llama.cpp process
    run_env(tool)                           that environment when a remembered check of this llama.cpp failed
    forget(tool)                            drop the remembered checks (of one llama.cpp, or all)
probe calls gpu_probe.judge_gpus() to add each listed device's check and verdict.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.device.fs import LIVE_ROOT
from edgepilot.device.gpu_llama import LlamaDevice, backend_of, read_llama_devices
from edgepilot.engine import gpu_cache
from edgepilot.engine.native_tools import KEEP_OUT_ENV, ToolMissing, built_tool, find_tool, tool_version

# lavapipe: ~3 s idle with a warm cache, 12 s on a VM, over 60 s under two compiles with a cold shader cache;
# a phone compiles llama.cpp's pipelines on its first Vulkan run. A check past it runs once more, 3x longer
# (engine/checked_run.py); a timeout is never a final verdict.
DEADLINE_S = 60.0
DEADLINE_ENV = "EDGEPILOT_GPU_CHECK_DEADLINE"  # seconds (tests use a short one)
# Two layers: with one, a model whose output shares the token embedding (Gemma) puts 0 bytes on the
# device; two put a repeating layer and its KV cache there (Gemma 3 270M on lavapipe: 3.8 MiB in 4.6 s;
# all layers: 47 s).
CHECK_LAYERS = 2
LIST_TOOLS = ("llama-server", "llama-cli", "llama-completion", "llama-bench")
CHECK_TOOLS = ("llama-bench", "llama-completion")

if TYPE_CHECKING:
    from edgepilot.engine.gpu_outcome import DeviceCheck


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
    from edgepilot.engine.gpu_outcome import from_entry  # with the child-run modules: once there is a check

    checker = check_tool(tool)
    if checker is None:
        return None
    name = device.name if isinstance(device, LlamaDevice) else device
    described = device.description if isinstance(device, LlamaDevice) else None
    scope = _scope(checker)
    for entry in reversed(list(gpu_cache.load().values())):
        same = entry.get("scope") == scope and entry.get("device") == name
        if same and (described is None or entry.get("description") == described):
            return from_entry(entry)
    return None


def cached_checks() -> list[DeviceCheck]:
    """Every remembered check, oldest first (whatever llama.cpp or driver it was for)."""
    from edgepilot.engine.gpu_outcome import from_entry

    return [c for c in (from_entry(e) for e in gpu_cache.load().values()) if c is not None]


def forget(tool: Path | None = None, *, every: bool = False) -> int:
    """Forget the remembered checks of this llama.cpp (every: of all); how many were dropped."""
    if every:
        return gpu_cache.forget()
    checker = check_tool(tool)
    return gpu_cache.forget(_scope(checker)) if checker is not None else 0


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
    deadline: float | None = None,
    model: Path | None = None,
    *,
    fresh: bool = False,
    recheck_timeouts: bool = True,
    progress: Callable[[str], None] | None = None,
) -> DeviceCheck:
    """Check one device in a child process, or return the remembered check: unless fresh=True, and unless
    it was a timeout (slow, hung) and recheck_timeouts. Never raises for what the driver does; `tool` is any
    program of the llama.cpp to check (None: the installed one); deadline: DEADLINE_S (or $DEADLINE_ENV)."""
    from edgepilot.engine.checked_run import FINAL, checked_at_now, deadline_from_env, run_checked
    from edgepilot.engine.gpu_outcome import DeviceCheck, from_entry, judge

    if deadline is None:
        deadline = deadline_from_env(DEADLINE_ENV, DEADLINE_S)
    dev = _named(device, tool)
    checker = check_tool(tool)
    if checker is None:
        return DeviceCheck(
            dev.name, dev.description, None, "not-run", 0.0, "no llama-bench or llama-completion"
        )
    scope = _scope(checker)
    key = gpu_cache.check_key(scope, dev.name, dev.description)
    if not fresh:
        found = from_entry(gpu_cache.load().get(key))
        if found is not None and (found.outcome in FINAL or not recheck_timeouts):
            return found
    model = model or _default_model()
    if model is None:
        detail = "no model to check with (the bundled model package is missing)"
        return DeviceCheck(dev.name, dev.description, None, "not-run", 0.0, detail, tool=str(checker))
    if progress is not None:
        what = f"{dev.name} ({dev.description})" if dev.description else dev.name
        progress(f"checking {what} with a 2-layer run in a child process (up to {deadline:g} s)")
    run = run_checked(argv_for(checker, dev.name, model), deadline, _child_env(), on_retry=progress)
    got = judge(dev, run)
    got.tool = str(checker)
    got.checked_at = checked_at_now()
    if got.outcome != "not-run":
        entry = {k: v for k, v in asdict(got).items() if k != "cached"}
        why = gpu_cache.store(key, {**entry, "scope": scope})
        if why and progress is not None:
            progress(f"the check's result is not remembered: {why}")
    return got


def _child_env() -> dict[str, str]:
    # LLAMA_ARG_* would override the command line (LLAMA_ARG_DEVICE=none: not a GPU check at all)
    return {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}


def driver_kept_out_env() -> dict[str, str]:
    """The environment that keeps GPU drivers from loading in a llama.cpp process (a CPU run that a
    crashing driver cannot touch, and whose plan does not depend on the drivers installed): every CPU run
    gets it (engine/child_env.py)."""
    return dict(KEEP_OUT_ENV)


def checks_for(tool: Path | None = None) -> list[DeviceCheck]:
    """The remembered checks of this llama.cpp with this machine's current driver files and loader
    environment. Loads no driver (no device list): a few stat calls and one small file."""
    from edgepilot.engine.gpu_outcome import from_entry

    checker = check_tool(tool)
    if checker is None:
        return []
    scope = _scope(checker)
    out = [from_entry(e) for e in gpu_cache.load().values() if e.get("scope") == scope]
    return [c for c in out if c is not None]


def failed_checks(tool: Path | None = None) -> list[DeviceCheck]:
    """The remembered failed checks of this llama.cpp (checks_for)."""
    return [c for c in checks_for(tool) if c.ok is False]


def run_env(tool: Path | None = None) -> dict[str, str]:
    """driver_kept_out_env() when a check of one of this llama.cpp's devices failed (crash, hang or error),
    else {}: what a GPU run may not offer. CPU runs keep drivers out always (child_env.llama_env)."""
    return driver_kept_out_env() if failed_checks(tool) else {}
