"""llama.cpp's own tools, as `edgepilot build` makes them: missing tools skip these tests (with the reason)
unless EDGEPILOT_REQUIRE_NATIVE_TOOLS=1 (CI builds them first), and then they fail."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nativekit import native_tool

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))  # servekit: start a real serve


@pytest.fixture(scope="session")
def rpc_server_tool() -> Path:
    return native_tool("rpc-server")


@pytest.fixture(scope="session")
def llama_server_tool() -> Path:
    return native_tool("llama-server")
