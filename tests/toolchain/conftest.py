"""The native tools `edgepilot build` made (CI builds them first: .ci/run).

These tests never compile (15 minutes on 2 cores): without an up-to-date build they skip with the command to
run; with EDGEPILOT_REQUIRE_NATIVE_TOOLS=1 (CI sets it after building) a missing build is a failure, so the
tests of the built tools cannot silently stop running.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_ENV = "EDGEPILOT_REQUIRE_NATIVE_TOOLS"


@pytest.fixture(scope="session")
def native_build():
    from edgepilot.toolchain.builder import build_tools

    planned = build_tools("native", print_only=True)
    if not planned.cached:
        problem = "llama.cpp's tools are not built (or not up to date) here: run `edgepilot build`"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {problem}")
        pytest.skip(problem)
    return planned


@pytest.fixture(scope="session")
def aarch64_build():
    """`edgepilot build --target aarch64` (a phone's tools cross-built here); CI builds it and requires it."""
    import shutil

    from edgepilot.toolchain.builder import build_tools

    planned = build_tools("aarch64", print_only=True)
    problem = None
    if not planned.cached:
        problem = "the aarch64 tools are not built here: run `edgepilot build --target aarch64`"
    elif not shutil.which("qemu-aarch64-static"):
        problem = "qemu-aarch64-static is missing (apt-get install qemu-user-static)"
    if problem:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {problem}")
        pytest.skip(problem)
    return planned
