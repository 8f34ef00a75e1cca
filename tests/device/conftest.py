"""Fixtures for the device layer: the device trees and the CLI app with the probe commands registered."""

from __future__ import annotations

from pathlib import Path

import pytest

DEVICES = Path(__file__).resolve().parents[1] / "devices"


@pytest.fixture(scope="session")
def devices() -> Path:
    return DEVICES


@pytest.fixture(scope="session")
def cli_app():
    """`edgepilot.cli.app` with every command registered (device commands never import llama.cpp)."""
    import edgepilot.cli as cli

    return cli.app
