"""The environment of every llama.cpp program edgepilot starts.

A GPU backend that is installed is loaded whatever the command line says (`libggml-vulkan.so` creates a Vulkan
instance and enumerates the devices as it loads), and it takes large batches even at `-ngl 0`. So a CPU run
hides the Vulkan devices as well as naming `-dev none`: an empty GGML_VK_VISIBLE_DEVICES leaves ggml-vulkan
with no device to create. And every CPU run keeps the GPU drivers from loading at all (engine/gpu_check.py
says how), whatever a driver check found: a loaded driver costs memory the plan does not count (Debian's
lavapipe with its libLLVM: 382 MiB against 318 MiB for the same CPU run) and a broken one crashes the run. The
in-process engine, CPU-only, keeps them out of edgepilot's own process while its library starts
(gpu_drivers_kept_out).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from edgepilot.engine.native_tools import HIDE_VULKAN_DEVICES, NO_DRIVER_MANIFEST

# How a broken GPU driver ends a llama.cpp process, as a shell reports it (128 + SIGSEGV, SIGABRT, SIGBUS). A
# CPU run that ended so while loading was started once more with the drivers kept out (ServerEngine, serve's
# watchdog); now every CPU run keeps them out from its first start, so neither has to.
DRIVER_CRASH_STATUSES = frozenset(128 + s for s in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS))


def llama_env(
    cpu_only: bool = True,
    tool: Path | str | None = None,
    base: Mapping[str, str] | None = None,
    keep_drivers_out: bool = False,
) -> dict[str, str]:
    """The environment for one llama.cpp child: no backtrace on a crash (gdb is not ours to start), and on a
    CPU run no GPU device and every GPU driver kept from loading (the plan of a CPU run is the same whether
    drivers are installed or not). A GPU run gets the user's environment as it is: the device the user named
    is tried, warned about. `tool` and `keep_drivers_out` are kept for callers; a CPU run keeps drivers out
    either way."""
    from edgepilot.engine.gpu_check import driver_kept_out_env

    del tool, keep_drivers_out
    env = dict(os.environ if base is None else base, GGML_NO_BACKTRACE="1")
    if cpu_only:
        env.update(HIDE_VULKAN_DEVICES)
        env.update(driver_kept_out_env())
    return env


def shown_keep_out(argv: Sequence[str]) -> list[str]:
    """What a printed llama.cpp command line starts with so that a copy keeps the GPU drivers out as
    edgepilot's own CPU runs do: `VK_ICD_FILENAMES=<nowhere>` (every Khronos loader reads it; a shell
    assignment, copy-pasteable) when argv is a CPU run (`-dev none`) and this machine has a Vulkan driver
    manifest; [] otherwise. Android's system loader reads no such variable: there `-dev none` holds."""
    from edgepilot.engine.gpu_cache import driver_files

    args = list(argv)
    on_cpu = any(a == "-dev" and b == "none" for a, b in zip(args, args[1:], strict=False))
    if not on_cpu or not driver_files():
        return []
    return [f"VK_ICD_FILENAMES={NO_DRIVER_MANIFEST}"]


@contextlib.contextmanager
def gpu_drivers_kept_out() -> Iterator[None]:
    """No GPU driver in this process while llama.cpp starts in it: the in-process engine is CPU-only, and the
    libllama of `edgepilot build --vulkan` would otherwise create a Vulkan instance here (a driver that
    crashes while listing its devices would end edgepilot) and let ggml take big products to the GPU at
    -ngl 0. The loader reads these variables once, when ggml's backend registry is made; they are put back
    at once, so the GPU runs edgepilot starts as children see the user's own."""
    from edgepilot.engine.gpu_check import driver_kept_out_env

    kept_out = driver_kept_out_env()
    saved = {k: os.environ.get(k) for k in kept_out}
    os.environ.update(kept_out)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
