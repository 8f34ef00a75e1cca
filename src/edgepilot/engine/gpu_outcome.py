"""A GPU driver check's result (probe's `gpus[].check`): the verdict of its child run(s) in words, and the
same read back from the check cache as untrusted input (each field typed; a damaged entry is no check).

Verdicts (engine/checked_run.py): ok, slow, crashed, hung, failed, not-run, each with `checked_at`.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from edgepilot.device.gpu_llama import LlamaDevice
from edgepilot.engine.checked_run import OUTCOMES, TIMEOUTS, CheckedRun
from edgepilot.engine.gpu_run import parse_facts

MAX_TEXT = 1000
MAX_EVIDENCE = 12
RECHECK = "`edgepilot probe --check-gpu` or `edgepilot tune` checks it again"


@dataclass
class DeviceCheck:
    """One driver check: probe's `gpus[].check{ok, outcome, seconds}` and what it found."""

    device: str  # "Vulkan0"
    description: str
    ok: bool | None  # None: not run, or not decided (slow)
    outcome: str  # ok | slow | crashed | hung | failed | not-run
    seconds: float
    detail: str  # one sentence: "the Vulkan driver crashed during the check: SIGSEGV"
    signal: str | None = None
    exit_code: int | None = None
    facts: dict[str, Any] = field(default_factory=dict)  # the ggml_vulkan line, buffer sizes
    evidence: list[str] = field(default_factory=list)  # the last lines it printed (a failed check)
    tool: str | None = None
    cached: bool = False
    checked_at: str | None = None
    attempts: int = 1  # 2: it ran past its first deadline and was run once more
    cpu_seconds: float | None = None  # CPU time the (last) run used

    def as_probe(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def final(self) -> bool:
        """A verdict that stays (ok, crashed, failed); a timeout (slow, hung) is checked again."""
        return self.outcome not in TIMEOUTS and self.outcome != "not-run"


def _backend_word(dev: LlamaDevice) -> str:
    return {"vulkan": "Vulkan", "opencl": "OpenCL"}.get(dev.backend, dev.backend)


def judge(dev: LlamaDevice, run: CheckedRun) -> DeviceCheck:
    """The check of `dev` from its run(s)."""
    r = run.result
    number = re.search(r"(\d+)$", dev.name)
    lines = [line for a in run.attempts for line in a.kept]
    facts = parse_facts(lines, int(number.group(1)) if number else None)
    word = _backend_word(dev)
    cpu = None if r.cpu_seconds is None else round(r.cpu_seconds, 2)
    base: dict[str, Any] = {
        "facts": facts, "evidence": r.tail[-MAX_EVIDENCE:], "exit_code": r.returncode, "signal": r.signal,
        "attempts": len(run.attempts), "cpu_seconds": cpu,
    }  # fmt: skip
    seconds = round(run.seconds, 2)
    before = f" ({run.timeline()})" if run.retried else ""
    if run.outcome == "not-run":
        return DeviceCheck(dev.name, dev.description, None, "not-run", 0.0, r.start_error or "not run")
    if run.outcome == "slow":
        detail = (
            f"the {word} check was still working (using CPU, as a driver compiling its pipelines does) after "
            f"{' + '.join(f'{d:g}' for d in run.deadlines)} s: a slow start, not a verdict{before}; {RECHECK}"
        )
        return DeviceCheck(dev.name, dev.description, None, "slow", seconds, detail, **base)
    if run.outcome == "hung":
        again = f"; tried again: {run.timeline().split('; ', 1)[-1]}" if run.retried else ""
        detail = (
            f"the {word} driver hung during the check: no end after {run.deadlines[0]:g} s and no progress "
            f"(no CPU used){again}; killed; {RECHECK}"
        )
        return DeviceCheck(dev.name, dev.description, False, "hung", seconds, detail, **base)
    if run.outcome == "crashed":
        detail = f"the {word} driver crashed during the check: {r.signal}{before}"
        return DeviceCheck(dev.name, dev.description, False, "crashed", seconds, detail, **base)
    if run.outcome == "failed":
        last = r.error_line or (r.tail[-1] if r.tail else "")
        detail = f"the check's {word} run exited with status {r.returncode}" + (f": {last}" if last else "")
        detail = (detail + before)[:400]
        return DeviceCheck(dev.name, dev.description, False, "failed", seconds, detail, **base)
    detail = f"created the device and a buffer, and computed on it in {r.seconds:.2f} s{before}"
    return DeviceCheck(dev.name, dev.description, True, "ok", seconds, detail, **{**base, "evidence": []})


def _text(value: Any, limit: int = MAX_TEXT) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    """A finite, non-negative number (a bool is not a number, NaN is not a duration)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and 0 <= value < 1e9 else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 31 else None


def _facts(value: Any) -> dict[str, Any]:
    """The device line's facts (scalars only) and buffer sizes (bytes, non-negative integers)."""
    if not isinstance(value, dict):
        return {}
    out: dict[str, Any] = {}
    device = value.get("device")
    if isinstance(device, dict):
        kept = {}
        for k, v in list(device.items())[:32]:
            if isinstance(v, str):
                kept[str(k)[:40]] = v[:MAX_TEXT]
            elif isinstance(v, bool) or (_int(v) is not None and v >= 0):
                kept[str(k)[:40]] = v
        out["device"] = kept
    buffers = value.get("buffers")
    if isinstance(buffers, dict):
        sizes = {str(k)[:100]: v for k, v in list(buffers.items())[:32] if _int(v) is not None and v >= 0}
        if sizes:
            out["buffers"] = sizes
    return out


def from_entry(entry: Any) -> DeviceCheck | None:
    """A remembered check, each field checked for type and range; None for a damaged or foreign entry."""
    if not isinstance(entry, dict):
        return None
    device, description = _text(entry.get("device"), 200), _text(entry.get("description"))
    outcome = entry.get("outcome")
    seconds, ok = _number(entry.get("seconds")), entry.get("ok")
    if device is None or description is None or outcome not in OUTCOMES or seconds is None:
        return None
    if ok is not None and not isinstance(ok, bool):
        return None
    if ok is not (outcome == "ok") and not (ok is None and outcome in ("slow", "not-run")):
        return None  # a verdict that contradicts itself
    evidence = entry.get("evidence")
    got = DeviceCheck(
        device,
        description,
        ok,
        outcome,
        seconds,
        _text(entry.get("detail")) or outcome,
        signal=_text(entry.get("signal"), 40),
        exit_code=_int(entry.get("exit_code")),
        facts=_facts(entry.get("facts")),
        evidence=[e[:MAX_TEXT] for e in evidence[-MAX_EVIDENCE:] if isinstance(e, str)]
        if isinstance(evidence, list)
        else [],
        tool=_text(entry.get("tool")),
        checked_at=_text(entry.get("checked_at"), 40),
        attempts=max(1, min(2, _int(entry.get("attempts")) or 1)),
        cpu_seconds=_number(entry.get("cpu_seconds")),
    )
    got.cached = True
    return got
