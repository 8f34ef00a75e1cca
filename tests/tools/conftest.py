"""bench, tune, quantize and compare through llama.cpp's own programs (the tools engine), for real: the
programs `edgepilot build` made or the ones on PATH (tests/nativekit.py: missing ones skip, or fail with
EDGEPILOT_REQUIRE_NATIVE_TOOLS=1). Each test gets a fresh data directory and its CPU affinity back."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshkit import data_dir, restore_affinity
from nativekit import native_tool

__all__ = ["data_dir", "restore_affinity"]


@pytest.fixture(scope="session")
def llama_bench_tool() -> Path:
    return native_tool("llama-bench")


@pytest.fixture(scope="session")
def llama_quantize_tool() -> Path:
    return native_tool("llama-quantize")
