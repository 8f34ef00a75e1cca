"""Command-line interface: thin commands over library functions (one module per command family, imported
when one of its commands runs: commands.py)."""

from edgepilot.cli.app import app


def main() -> None:
    app()
