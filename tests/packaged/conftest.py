"""The packaged lane (scripts/packaged-lane.sh): without it these tests skip with the command to run; with
EDGEPILOT_REQUIRE_PACKAGED_LANE=1 (CI sets it after setting the lane up) a missing lane is a failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import sidlane as lane

REQUIRE_ENV = "EDGEPILOT_REQUIRE_PACKAGED_LANE"


@pytest.fixture(scope="session")
def sid_root() -> Path:
    root, ready = lane.lane_root()
    problem = None
    if not lane.is_root():
        problem = "the packaged lane needs root (unshare + chroot)"
    elif not ready:
        problem = "the packaged lane is not set up: run scripts/packaged-lane.sh"
    if problem:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {problem}")
        pytest.skip(problem)
    lane.install_checkout(root)
    return root
