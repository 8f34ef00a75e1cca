"""`edgepilot build`: thin CLI over edgepilot.toolchain.builder.build_tools."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from edgepilot.cli import flags
from edgepilot.cli.app import app, emit, err_console, user_errors

if TYPE_CHECKING:
    from rich.console import Console

    from edgepilot.toolchain.builder import BuildResult


@contextlib.contextmanager
def cmake_progress() -> Iterator:
    """A rich bar on stderr fed by cmake's [ NN%] lines (on a terminal); else a line every few seconds."""
    from edgepilot.shown import shown

    err = err_console()
    if not err.is_terminal:
        from edgepilot.cli.progress import PipeProgress, percent

        with PipeProgress("build", percent) as plain:
            yield lambda done, what: plain.update(what.rsplit("/", 1)[-1], done, 100)
        return
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("building"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[what]}", markup=False),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("build", total=100, what="")

        def update(percent: int, what: str) -> None:
            bar.update(task, completed=percent, what=shown(what.rsplit("/", 1)[-1][:50]))

        yield update


def render_build(result: BuildResult, out: Console) -> None:
    import shlex

    from rich.text import Text

    from edgepilot.cli.narrow import print_command, say
    from edgepilot.shown import shown

    target = Text(str(result.target), style="bold")
    bin_dir = shown(result.bin_dir)
    if not result.built:
        state = "up to date" if result.cached else "not built yet"
        out.print(Text.assemble(target, f" tools ({state}), the build would run:"))
    elif result.cached:
        out.print(Text.assemble(target, f" tools up to date in {bin_dir}"))
    else:
        out.print(Text.assemble(target, f" tools built in {result.seconds:.0f} s into {bin_dir}"))
    for reason in result.reasons:
        say(out, f"  · {reason}", style="dim")
    if result.smoke:
        say(out, f"  llama-completion --version: {result.smoke}")
    if result.vulkan:
        fix = (
            f"with the old-Mali fix ({result.vulkan_fix})"
            if result.vulkan_fix
            else "without the old-Mali fix"
        )
        say(out, f"  Vulkan backend: {'built in' if result.built else 'to be built in'}, {fix}")
    out.print("Equivalent cmake lines:", style="bold")
    for line in result.cmake_lines:
        print_command(out, "", shlex.split(line), style="")
    if result.env:
        env = [f"{k}={v}" for k, v in result.env.items()]
        print_command(out, "Run a tool with:", [*env, "qemu-aarch64-static", "TOOL"], style="")


@app.command()
@click.option(
    "--target",
    default="native",
    help="native (this device) or aarch64 (cross-build for a phone)",
    metavar="native|aarch64",
)
@click.option(
    "-j", "--jobs", type=int, help="Parallel compile jobs (default: the core count, at most 8)", metavar="N"
)
@click.option("--tools", "tool_list", help="Comma-separated tools (default: all of them)", metavar="LIST")
@click.option(
    "--source",
    type=click.Path(path_type=Path),
    help="A llama-cpp-python sdist or llama.cpp directory",
    metavar="SDIST|DIR",
)
@click.option(
    "--arm-arch", help="GGML_CPU_ARM_ARCH, e.g. armv8.2-a+dotprod (default: from the probe)", metavar="ARCH"
)
@click.option(
    "--vulkan/--no-vulkan",
    default=None,
    help="Add ggml's Vulkan backend with edgepilot's old-Mali fix (needs glslc; default: as last built)",
)
@click.option("--print-only", is_flag=True, help="Print the flags and cmake lines without building")
@flags.JSON
@user_errors
def build(
    target: str,
    jobs: int | None,
    tool_list: str | None,
    source: Path | None,
    arm_arch: str | None,
    vulkan: bool | None,
    print_only: bool,
    as_json: bool,
) -> None:
    """Compile llama.cpp's tools (llama-server, llama-bench, ...) from the engine's source for this device."""
    from edgepilot.toolchain.builder import build_tools

    flags.check_range("--jobs", jobs, 1, 256)
    tools = [t.strip() for t in tool_list.split(",") if t.strip()] if tool_list else None
    with cmake_progress() as progress:
        result = build_tools(
            target, jobs, tools, print_only=print_only, source=source, arm_arch=arm_arch, progress=progress,
            vulkan=vulkan,
        )  # fmt: skip
    emit(result, as_json, render_build)
