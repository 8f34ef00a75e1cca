"""llama.cpp's own programs for the tests that run them: built by `edgepilot build` (CI builds them first) or
installed on PATH. A missing program skips the test with the command or package that provides it, unless
EDGEPILOT_REQUIRE_NATIVE_TOOLS=1, and then it fails: the tool tests cannot silently stop running."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REQUIRE_ENV = "EDGEPILOT_REQUIRE_NATIVE_TOOLS"


def native_tool(name: str) -> Path:
    from edgepilot.engine.native_tools import ToolMissing, find_tool

    try:
        return find_tool(name)
    except ToolMissing as exc:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(str(exc))
        pytest.skip(str(exc))
