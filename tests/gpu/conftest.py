"""The GPU lane: the packaged lane's root (scripts/packaged-lane.sh) with Debian's Vulkan backend for ggml,
Mesa's lavapipe and the lying layer (lying_layer.c) built in it. Without the lane these tests skip with what
to run; with EDGEPILOT_REQUIRE_PACKAGED_LANE=1 (CI, after setting the lane up) a missing lane is a failure.
Every test here carries the `gpu_lane` marker (`pytest -m "not gpu_lane"` leaves them out)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE.parent / "packaged") not in sys.path:
    sys.path.insert(0, str(HERE.parent / "packaged"))  # sidlane: the packaged lane's way into the root

import gpulane  # noqa: E402
import sidlane as lane  # noqa: E402
import vulkanfix  # noqa: E402

REQUIRE_ENV = "EDGEPILOT_REQUIRE_PACKAGED_LANE"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu_lane: needs the packaged lane's Vulkan pieces (tests/gpu)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.gpu_lane)


def _skip_or_fail(problem: str) -> None:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {problem}")
    pytest.skip(problem)


@pytest.fixture(scope="session")
def gpu_root() -> Path:
    """The packaged lane's root with this checkout installed, checked for the GPU lane's packages."""
    root, ready = lane.lane_root()
    if not lane.is_root():
        _skip_or_fail("the GPU lane needs root (unshare + chroot)")
    if not ready:
        _skip_or_fail("the packaged lane is not set up: run scripts/packaged-lane.sh")
    missing = gpulane.missing_pieces(root)
    if missing:
        _skip_or_fail(f"the packaged lane lacks {', '.join(missing)}: rerun scripts/packaged-lane.sh")
    lane.install_checkout(root)
    return root


@pytest.fixture(scope="session")
def lying_layer(gpu_root: Path) -> str:
    """The directory in the root holding the built layer and its manifest (built once per source hash)."""
    return gpulane.build_layer(gpu_root)


@pytest.fixture(scope="session")
def smollm_in_root(gpu_root: Path) -> str:
    return lane.model_in_root(gpu_root, "smollm")


@pytest.fixture(scope="session")
def fixed_build(gpu_root: Path) -> dict:
    """`edgepilot build --vulkan` in the root (vulkanfix.py): its JSON, once per session."""
    return vulkanfix.build_fixed(gpu_root)
