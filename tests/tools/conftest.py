"""bench, tune, quantize and compare through llama.cpp's own programs (the tools engine), for real: the
programs `edgepilot build` made or the ones on PATH (tests/nativekit.py: missing ones skip, or fail with
EDGEPILOT_REQUIRE_NATIVE_TOOLS=1). Each test gets a fresh data directory and its CPU affinity back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nativekit import native_tool


@pytest.fixture(scope="session")
def llama_bench_tool() -> Path:
    return native_tool("llama-bench")


@pytest.fixture(scope="session")
def llama_quantize_tool() -> Path:
    return native_tool("llama-quantize")


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "data"
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(path))
    return path


@pytest.fixture(autouse=True)
def restore_affinity():
    before = os.sched_getaffinity(0)
    yield
    if os.sched_getaffinity(0) != before:
        os.sched_setaffinity(0, before)
