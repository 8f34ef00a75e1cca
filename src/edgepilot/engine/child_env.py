"""The environment of every llama.cpp program edgepilot starts.

A GPU backend that is installed is loaded whatever the command line says (`libggml-vulkan.so` creates a Vulkan
instance and enumerates the devices as it loads), and it takes large batches even at `-ngl 0`. So a CPU run
hides the Vulkan devices as well as naming `-dev none`: an empty GGML_VK_VISIBLE_DEVICES leaves ggml-vulkan
with no device to create. Drivers whose crash-isolated check failed are kept from loading at all
(engine/gpu_check.py says how).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

HIDE_VULKAN_DEVICES = {"GGML_VK_VISIBLE_DEVICES": ""}


def llama_env(
    cpu_only: bool = True, base: Mapping[str, str] | None = None, kept_out: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment for one llama.cpp child: no backtrace on a crash (gdb is not ours to start), no GPU
    device on a CPU run, and the environment that keeps a crashed driver out (kept_out)."""
    env = dict(os.environ if base is None else base, GGML_NO_BACKTRACE="1")
    if cpu_only:
        env.update(HIDE_VULKAN_DEVICES)
    env.update(kept_out or {})
    return env
