"""What bench, tune and a sustained bench show while they work and when a Ctrl-C stops them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import click

from edgepilot.cli.app import err_console


@contextlib.contextmanager
def progress_bar(title: str) -> Iterator:
    """A rich progress bar on stderr; off a terminal a line every few seconds (--json/--csv stdout stays
    clean either way)."""
    if not err_console().is_terminal:
        from edgepilot.cli.progress import PipeProgress

        with PipeProgress(title) as plain:
            yield plain.update
        return
    from rich.progress import MofNCompleteColumn, Progress, TimeElapsedColumn

    from edgepilot.cli.narrow import progress_columns
    from edgepilot.shown import shown

    # the description can name a model or a device: text, never markup
    columns = progress_columns(MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console(), transient=True, expand=True) as bar:
        task = bar.add_task(title, total=None)

        def update(description: str, done: int, total: int) -> None:
            bar.update(task, description=shown(f"{title}: {description}"), completed=done, total=total)

        yield update


def said_stopped(partial: bool) -> None:
    if partial:  # the tests that finished follow, as chat keeps a stopped answer
        err_console().print("(stopped)", markup=False)


def exit_if_stopped(partial: bool) -> None:
    if partial:  # what finished is shown and kept; the status still says a Ctrl-C ended it
        raise click.exceptions.Exit(130)
