"""Helpers for the doctor tests: where the real failure logs and device trees are, and diagnose-a-log."""

from __future__ import annotations

from pathlib import Path

from edgepilot.doctor.diagnose import diagnose
from edgepilot.doctor.evidence import read_log
from edgepilot.doctor.types import Diagnosis

TESTS = Path(__file__).resolve().parents[1]
LOGS = TESTS / "logs"
DEVICES = TESTS / "devices"


def diagnose_log(name: str, device: str | None = None, **kw) -> Diagnosis:
    """Diagnose tests/logs/NAME; without a device, no probe (these logs come from other machines)."""
    root = DEVICES / device if device else None
    return diagnose(read_log(LOGS / name), root=root, **kw)
