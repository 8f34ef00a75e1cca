"""`edgepilot probe` and `edgepilot snapshot save`: thin CLI over edgepilot.device."""

from __future__ import annotations

from pathlib import Path

import click

from edgepilot.cli import flags
from edgepilot.cli.app import app, emit, user_errors

ROOT = click.option(
    "--root",
    type=click.Path(path_type=Path),
    default=Path("/"),
    show_default=True,
    help="Read a device tree or snapshot (.tar.gz) instead of this machine",
)


@click.group(no_args_is_help=True)
def snapshot() -> None:
    """Save this device's relevant files and command outputs so `--root` can replay them."""


app.add_command(snapshot)


@app.command()
@ROOT
@flags.ENGINE
@flags.JSON
@user_errors
def probe(root: Path, engine: str | None, as_json: bool) -> None:
    """What this device is: CPU clusters and ISA, memory, Android/Termux, Vulkan, thermal, battery, storage,
    and the llama.cpp engine edgepilot runs here (in-process, or llama.cpp's programs with their version)"""
    from edgepilot.cli.probe_render import render_probe
    from edgepilot.device.probe import probe as probe_device
    from edgepilot.engine.choice import engine_facts

    facts = probe_device(root)
    if root == Path("/"):
        facts.engine = engine_facts(engine)
    emit(facts, as_json, render_probe)


@snapshot.command("save")
@click.argument("out", type=click.Path(path_type=Path), help="New directory, or a path ending in .tar.gz")
@ROOT
@flags.JSON
@user_errors
def snapshot_save(out: Path, root: Path, as_json: bool) -> None:
    """Capture the files and command outputs `probe` reads, in the layout `--root` replays."""
    from edgepilot.cli.probe_render import render_snapshot
    from edgepilot.device.snapshot import save

    emit(save(out, root), as_json, render_snapshot)
