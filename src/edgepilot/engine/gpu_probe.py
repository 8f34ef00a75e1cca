"""probe's GPU checks: each device llama.cpp lists gets its driver check (engine/gpu_check.py) and the
verdict that follows. `probe` shows a remembered check (a remembered timeout with what re-checks it) and runs
one that is missing; `probe --check-gpu` forgets this llama.cpp's remembered checks and runs them all again;
`--no-gpu-check` runs none."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.device.gpu_llama import LlamaDevice, backend_of
from edgepilot.engine.gpu_check import cached_check, check

if TYPE_CHECKING:
    from edgepilot.device.gpu import VulkanDevice


def judge_gpus(
    gpus: list[VulkanDevice],
    tool: Path | None,
    run: bool = True,
    deadline: float | None = None,
    progress: Callable[[str], None] | None = None,
    *,
    fresh: bool = False,
) -> None:
    """Each listed device's check (remembered, else run when `run`; run again when `fresh`) and the verdict
    that follows. A failed check marks the device unusable, with its reason."""
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
        if run:
            found = check(tool, dev, deadline, fresh=fresh, recheck_timeouts=False, progress=progress)
        else:
            found = cached_check(tool, dev)
        if found is None:
            gpu.check = {
                "ok": None,
                "outcome": "not-run",
                "seconds": 0.0,
                "detail": "not checked (--no-gpu-check)",
                "checked_at": None,
            }
        else:
            gpu.check = found.as_probe()
            if found.ok is False:
                gpu.vulkan_usable = False
                gpu.reasons.append(found.detail)
        gpu.verdict = final_verdict(gpu, listed=True)
