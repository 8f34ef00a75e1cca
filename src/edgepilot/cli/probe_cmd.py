"""`edgepilot probe` and `edgepilot snapshot save`: thin CLI over edgepilot.device."""

from __future__ import annotations

from pathlib import Path

import typer

from edgepilot.cli.app import app, emit, user_errors
from edgepilot.cli.probe_render import render_probe, render_snapshot
from edgepilot.device.probe import probe as probe_device
from edgepilot.device.snapshot import save

# Module-level so the defaults are not calls in the signature (ruff B008); typer reads them as usual.
ROOT_OPTION = typer.Option(
    Path("/"), "--root", help="Read a device tree or snapshot (.tar.gz) instead of this machine"
)
JSON_OPTION = typer.Option(False, "--json", help="Print one JSON object")
OUT_ARGUMENT = typer.Argument(..., help="New directory, or a path ending in .tar.gz")

snapshot_app = typer.Typer(
    name="snapshot",
    help="Save this device's relevant files and command outputs so `--root` can replay them.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)
app.add_typer(snapshot_app, name="snapshot")


@app.command()
@user_errors
def probe(
    root: Path = ROOT_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """What this device is: CPU clusters and ISA, memory, Android/Termux, Vulkan, thermal, battery, storage"""
    emit(probe_device(root), as_json, render_probe)


@snapshot_app.command("save")
@user_errors
def snapshot_save(
    out: Path = OUT_ARGUMENT,
    root: Path = ROOT_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Capture the files and command outputs `probe` reads, in the layout `--root` replays."""
    emit(save(out, root), as_json, render_snapshot)
