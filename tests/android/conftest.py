"""The Android lane: the real CLI, real models and the real in-process llama.cpp, on a SIMULATED Android
interpreter (sim/sitecustomize.py: this machine's Python reporting what PEP 738 says Android's Python
reports). Not a phone: see docs/testing.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))  # servekit: start a real serve

from simkit import PLATFORM_REPORT, python  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def simulated_android() -> dict:
    """Every test here runs its children on the simulation: make sure it switched, once per session."""
    done = python(PLATFORM_REPORT, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sys_platform"] == "android" and report["platform_system"] == "Android", report
    return report
