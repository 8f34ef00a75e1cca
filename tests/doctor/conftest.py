"""Fixtures for the doctor tests (helpers live in doctorkit.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def cli_app():
    """`edgepilot.cli.app` with every command registered."""
    import edgepilot.cli as cli

    return cli.app
