"""Command-line interface: thin commands over library functions (one module per command family)."""

from edgepilot.cli import fit_cmd, inspect_cmd, probe_cmd, run_cmd  # noqa: F401  (registers the commands)
from edgepilot.cli.app import app


def main() -> None:
    app()
