"""Fixtures for tests that measure or tune (tests/bench, tests/tools): a fresh data directory per test and the
process's CPU affinity restored after each (tune and bench pin the process). A conftest takes them with
`from freshkit import data_dir, restore_affinity`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "data"
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(path))
    return path


@pytest.fixture(autouse=True)
def restore_affinity():
    before = os.sched_getaffinity(0)
    yield
    from edgepilot.tuned.pinning import pin_process

    if os.sched_getaffinity(0) != before:
        pin_process(before)
