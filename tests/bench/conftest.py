"""Fixtures for bench/tune: a fresh data directory per test, the process affinity restored after each test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DEVICES = Path(__file__).resolve().parents[1] / "devices"


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "data"
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(path))
    return path


@pytest.fixture(autouse=True)
def restore_affinity():
    before = os.sched_getaffinity(0)
    yield
    from edgepilot.bench.pinning import pin_process

    if os.sched_getaffinity(0) != before:
        pin_process(before)


@pytest.fixture(scope="session")
def devices() -> Path:
    return DEVICES


@pytest.fixture(scope="session")
def cli_app():
    import edgepilot.cli as cli

    return cli.app
