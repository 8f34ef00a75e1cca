"""What `doctor --model FILE` adds to the log from this device's bench history of that model, as tables the
rules read like any log: the CPU's and the GPU's speeds (gpu-slower-than-cpu) and the last
`tune --speculation` trial's speeds against plain generation (speculation-slower-than-plain)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgepilot.errors import UserError

SPECULATION_HEADER = "edgepilot speculation history on this device (tune --speculation):"


def history_lines(model: str) -> list[str]:
    """The history tables for the model (checked already); none when there is nothing to compare."""
    entries = _entries(model)
    return _gpu_lines(entries) + _speculation_lines(entries)


def _entries(model: str) -> list[Any]:
    from edgepilot.bench.history import has_compared_results, history
    from edgepilot.bench.store import readable_history
    from edgepilot.tuned.identity import device_id, model_id

    try:
        if not readable_history() or not has_compared_results():  # the model is not read for nothing
            return []
        path = Path(model)
        device = device_id()
        return history(device.fingerprint, device.description, model_id(path).key, path.name, 200).entries
    except (UserError, OSError):
        return []


def _gpu_lines(entries: list[Any]) -> list[str]:
    """llama-bench's table (dev, ngl, test, t/s) when any result was measured on a GPU."""
    entries = [e for e in entries if e.speculation is None]
    if not any(e.device != "none" for e in entries):
        return []
    lines = [
        "edgepilot bench history on this device:",
        "| dev | ngl | test | t/s |",
        "| --- | --: | --- | --: |",
    ]
    for e in entries:
        lines.append(f"| {e.device} | {e.n_gpu_layers} | {e.test} | {e.avg_ts:.2f} ± {e.stddev_ts:.2f} |")
    return lines


def _speculation_lines(entries: list[Any]) -> list[str]:
    """The newest speculation trial: per kind of text, each candidate's speed and plain's (medians)."""
    trial = [e for e in entries if e.speculation is not None]
    if not trial:
        return []
    newest = [e for e in trial if e.run_id == trial[-1].run_id]
    plain = {e.text_kind: e.avg_ts for e in newest if e.speculation == "plain"}
    lines = [SPECULATION_HEADER, "| speculation | text | t/s | plain t/s |", "| --- | --- | --: | --: |"]
    for e in newest:
        if e.speculation != "plain" and e.text_kind in plain:
            lines.append(f"| {e.speculation} | {e.text_kind} | {e.avg_ts:.2f} | {plain[e.text_kind]:.2f} |")
    return lines if len(lines) > 3 else []
