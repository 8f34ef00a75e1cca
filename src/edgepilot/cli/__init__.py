"""Command-line interface: thin commands over library functions (one module per command family)."""

from edgepilot.cli import (  # noqa: F401  (importing registers the commands; each imports its work on use)
    bench_cmd,
    build_cmd,
    chat_cmd,
    cluster_cmd,
    doctor_cmd,
    fit_cmd,
    inspect_cmd,
    models_cmd,
    probe_cmd,
    quantize_cmd,
    run_cmd,
    serve_cmd,
)
from edgepilot.cli.app import app


def main() -> None:
    app()
