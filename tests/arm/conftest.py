"""The aarch64 lane for tests: llama.cpp cross-built and run under qemu-user (scripts/aarch64-lane.sh).

Without the lane these tests skip with the reason; with EDGEPILOT_REQUIRE_AARCH64_LANE=1 (CI sets it up and
sets this) a missing lane is a failure, so the lane tests cannot silently stop running.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import aarch64_lane  # noqa: E402

REQUIRE_ENV = "EDGEPILOT_REQUIRE_AARCH64_LANE"


@pytest.fixture(scope="session")
def lane() -> aarch64_lane.Lane:
    problem = aarch64_lane.lane_problem()
    if problem is not None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {problem}")
        pytest.skip(problem)
    return aarch64_lane.Lane(aarch64_lane.lane_dir())
