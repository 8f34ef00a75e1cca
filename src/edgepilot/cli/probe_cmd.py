"""`edgepilot probe` and `edgepilot snapshot save`: thin CLI over edgepilot.device."""

from __future__ import annotations

from pathlib import Path

import click

from edgepilot.cli import flags
from edgepilot.cli.app import app, emit, user_errors
from edgepilot.errors import UserError

ROOT = click.option(
    "--root",
    type=click.Path(path_type=Path, readable=False),  # root_archive.open_root says why one cannot be read
    default=Path("/"),
    show_default=True,
    help="Read a device tree or snapshot (.tar.gz) instead of this machine",
    metavar="DIR",
)


@app.group(no_args_is_help=True)
def snapshot() -> None:
    """Save this device's relevant files and command outputs so `--root` can replay them."""


NO_GPU_CHECK = click.option(
    "--no-gpu-check",
    is_flag=True,
    help="Do not run the GPU driver check (a 2-layer offloaded run in a child process); remembered checks "
    "still show",
)


CHECK_GPU = click.option(
    "--check-gpu",
    is_flag=True,
    help="Run the GPU driver checks again now, whatever was remembered (a check that ran past its deadline "
    "is never a final verdict; tune checks those again too)",
)


CHECK_ENGINE = click.option(
    "--check-engine",
    is_flag=True,
    help="Load llama.cpp's library as run does, to check the in-process engine really loads (without it, "
    "the engine is found by looking for its files)",
)


BANDWIDTH = click.option(
    "--bandwidth",
    is_flag=True,
    help="Measure the memory read bandwidth now (a few hundred ms) and keep it; without it a kept figure "
    "shows (bench, tune and run measure it when they first need it)",
)


def _progress(message: str) -> None:
    from edgepilot.shown import shown

    click.echo(f"probe: {shown(message)}", err=True)


def _llama_tool() -> Path | None:
    from edgepilot.engine.gpu_check import list_tool

    return list_tool()


@app.command()
@ROOT
@flags.ENGINE
@NO_GPU_CHECK
@CHECK_GPU
@CHECK_ENGINE
@BANDWIDTH
@flags.JSON
@user_errors
def probe(
    root: Path,
    engine: str | None,
    no_gpu_check: bool,
    check_gpu: bool,
    check_engine: bool,
    bandwidth: bool,
    as_json: bool,
) -> None:
    """What this device is: CPU clusters and ISA, memory, Android/Termux, GPUs as llama.cpp sees them (with a
    crash-isolated driver check), thermal, battery, storage, and the llama.cpp engine edgepilot runs here"""
    from edgepilot.cli.probe_render import render_probe
    from edgepilot.device.probe import probe as probe_device
    from edgepilot.engine.choice import engine_facts

    live = root == Path("/")
    if check_engine and not live:
        raise UserError("--check-engine loads this machine's llama.cpp: leave out --root to check it")
    if check_gpu and no_gpu_check:
        raise UserError("--check-gpu runs the GPU checks and --no-gpu-check runs none: give one of them")
    if check_gpu and not live:
        raise UserError("--check-gpu loads this machine's GPU drivers: leave out --root to check them")
    if bandwidth and not live:
        raise UserError("--bandwidth measures this machine's memory: leave out --root to measure it")
    tool = _llama_tool() if live else None
    facts = probe_device(root, llama_tool=tool)
    if live:
        from edgepilot.engine.gpu_probe import judge_gpus
        from edgepilot.tuned.bandwidth_cache import bandwidth_facts

        facts.engine = engine_facts(engine, check=check_engine)
        facts.memory_bandwidth = bandwidth_facts(measure=bandwidth, cpu=facts.cpu)
        judge_gpus(facts.gpus, tool, run=not no_gpu_check, progress=_progress, fresh=check_gpu)
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

    emit(save(out, root, llama_tool=_llama_tool() if root == Path("/") else None), as_json, render_snapshot)
