"""llama.cpp's own tools, as `edgepilot build` makes them: missing tools skip these tests (with the reason)
unless EDGEPILOT_REQUIRE_NATIVE_TOOLS=1 (CI builds them first), and then they fail."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))  # servekit: start a real serve


def native_tool(name: str) -> Path:
    from edgepilot.engine.native_tools import ToolMissing, find_tool

    try:
        return find_tool(name)
    except ToolMissing as exc:
        if os.environ.get("EDGEPILOT_REQUIRE_NATIVE_TOOLS") == "1":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def rpc_server_tool() -> Path:
    return native_tool("rpc-server")


@pytest.fixture(scope="session")
def llama_server_tool() -> Path:
    return native_tool("llama-server")
