"""Which GPUs tune tries: the one the user names, none, or (auto) those llama.cpp lists whose
crash-isolated driver check passes (engine/gpu_check.py: remembered, else run in a child with a deadline)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from edgepilot.plan.requested import parse_device


def devices_to_try(
    device: str | None, engine: str | None, progress: Callable[[str], None] | None = None
) -> tuple[list[str], list[str]]:
    """(devices to try, notes on those left out)."""
    name = parse_device(device)
    if name == "none":
        return [], []
    if name is not None:
        return [name], []
    from edgepilot.engine.choice import choose_engine
    from edgepilot.engine.gpu_check import check, llama_devices

    info = choose_engine(engine, tool="llama-bench")
    if info.kind != "tools" or not info.path:
        return [], []  # the in-process engine is CPU-only: tune measures the CPU
    tool = Path(info.path)
    devices, notes = [], []
    for dev in llama_devices(tool):
        checked = check(tool, dev, progress=progress)
        if checked.ok:
            devices.append(dev.name)
        else:
            notes.append(f"{dev.name} not tried: {checked.detail}")
    return devices, notes
