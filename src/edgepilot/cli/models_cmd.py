"""`edgepilot pull`, `edgepilot models` and `edgepilot rm`: thin CLI over edgepilot.store (pull, store)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from edgepilot.cli import flags
from edgepilot.cli.app import app, emit, err_console, user_errors
from edgepilot.cli.format import human_bytes, mib

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from edgepilot.store.manifest import Removed, StoreListing
    from edgepilot.store.pull import PullResult

STORE = click.option(
    "--store",
    help="Model store folder (default: $EDGEPILOT_MODELS_DIR, else models/ in the data dir)",
    metavar="DIR",
)


def _fits(value: bool | None) -> Text:
    from rich.text import Text

    return {True: Text("yes", style="green"), False: Text("no", style="red"), None: Text("?")}[value]


def render_pull(r: PullResult, out: Console) -> None:
    from edgepilot.cli.narrow import Column, print_command, print_records, say

    if r.file is None:
        budget = f" (budget {mib(r.budget_bytes)})" if r.budget_bytes else ""
        columns = [
            Column("file"),
            Column("size", numeric=True),
            Column("quant"),
            Column("peak", numeric=True),
            Column("max ctx", numeric=True),
            Column("fits"),
        ]
        rows = [
            [
                c.file,
                human_bytes(c.size),
                c.quant or "?",
                mib(c.peak_rss_bytes),
                str(c.max_ctx) if c.max_ctx else "-",
                _fits(c.fits),
            ]
            for c in r.candidates
        ]
        print_records(out, columns, rows, title=f"{r.repo} @ {r.revision}: GGUF files{budget}")
        for c in r.candidates:
            if c.reason:
                say(out, f"{c.file}: {c.reason}", style="dim")
        print_command(out, "pull one:", ["edgepilot", "pull", r.repo, "FILE"], style="dim")
        print_command(out, "the largest that fits:", ["edgepilot", "pull", r.repo, "--best"], style="dim")
        return
    how = "already in the store" if r.already_present else "pulled"
    if r.resumed_from:
        how += f" (resumed from {human_bytes(r.resumed_from)})"
    say(out, f"{how}: {r.path}")
    # the hub lists a sha256 for an LFS file only; a small file kept in git is checked by its git blob id
    checked = f"git blob id {r.git_blob_id} matches the hub" if r.git_blob_id else "matches the hub"
    say(out, f"{human_bytes(r.size)} · sha256 {r.sha256} ({checked})", style="dim")
    print_command(out, "run it:", ["edgepilot", "run", str(r.path)], style="dim")


class _Bar:
    """A rich progress bar on stderr, started on the first byte."""

    def __init__(self) -> None:
        self.progress = None
        self.task = None
        self.label = ""
        self.message = ""  # the stage as said (PipeProgress escapes it itself)
        self.plain = None  # off a terminal: a line every few seconds (cli/progress.py)

    def stage(self, message: str) -> None:
        from edgepilot.shown import shown

        self.label, self.message = shown(message), message  # names a file of the hub's
        if message.startswith("downloading"):
            self.stop()
        elif err_console().is_terminal:
            err_console().print(self.label, style="dim", markup=False)

    def retry(self, message: str) -> None:
        """A new try of a broken transfer: said on every stderr, a terminal or a log."""
        from edgepilot.shown import shown

        err_console().print(shown(message), style="yellow", markup=False, soft_wrap=True)

    def __call__(self, done: int, total: int) -> None:
        if self.progress is None and not err_console().is_terminal:  # a log or a pipe: no bar redrawn in it
            if self.plain is None:
                from edgepilot.cli.progress import PipeProgress, mebibytes

                self.plain = PipeProgress("pull", mebibytes).__enter__()
            self.plain.update(self.message or "downloading", done, total)
            return
        if self.progress is None:
            from rich.progress import DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

            from edgepilot.cli.narrow import progress_columns

            figures = (DownloadColumn(binary_units=True), TransferSpeedColumn(), TimeRemainingColumn())
            self.progress = Progress(
                *progress_columns(*figures), console=err_console(), transient=False, expand=True
            )
            self.progress.start()
            self.task = self.progress.add_task(self.label or "downloading", total=total)
        self.progress.update(self.task, completed=done)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
        if self.plain is not None:
            self.plain.__exit__(None, None, None)
            self.plain = None


@app.command()
@click.argument("repo", help="Hub repository, OWNER/NAME")
@click.argument("file", required=False, help="File to download (default: list the GGUF files)")
@click.option("--best", is_flag=True, help="Download the largest GGUF file that fits this device")
@click.option("--revision", default="main", show_default=True, help="Branch, tag or commit", metavar="REV")
@STORE
@flags.BUDGET
@click.option("--token-file", help="Read the hub token from a file (default: $HF_TOKEN)", metavar="FILE")
@click.option("--root", default="/", show_default=True, help="Device tree to plan for", metavar="DIR")
@flags.JSON
@user_errors
def pull(
    repo: str,
    file: str | None,
    best: bool,
    revision: str,
    store: str | None,
    budget: str | None,
    token_file: str | None,
    root: str,
    as_json: bool,
) -> None:
    """Download a GGUF model from a Hugging Face-style hub ($HF_ENDPOINT) into the model store: resumable,
    sha256-checked. Without FILE: the repository's GGUF files and whether each fits this device."""
    from edgepilot.store.hub import read_token
    from edgepilot.store.pull import pull as pull_model

    bar = _Bar()
    try:
        result = pull_model(
            repo,
            file,
            best=best,
            revision=revision,
            store=store,
            budget_bytes=flags.size_or_none(budget),
            root=root,
            token=read_token(token_file),
            progress=bar,
            on_stage=bar.stage,
            on_retry=bar.retry,
        )
    finally:
        bar.stop()
    if result.warning:
        from edgepilot.shown import shown

        err_console().print(f"warning: {shown(result.warning)}", style="yellow", markup=False, soft_wrap=True)
    emit(result, as_json, render_pull)


def render_models(listing: StoreListing, out: Console) -> None:
    from rich.text import Text

    from edgepilot.cli.narrow import Column, print_records, say

    if not listing.models:
        say(out, f"no models pulled into {listing.store} (get one: edgepilot pull OWNER/REPO)")
    listed = [*listing.models, *([listing.bundled] if listing.bundled else [])]
    if listed:
        columns = [
            Column("name"),
            Column("size", numeric=True),
            Column("quant"),
            Column("validation"),
            Column("pulled"),
        ]
        rows = [
            [
                m.name,
                human_bytes(m.size),
                m.quant or "?",
                Text(m.verdict, style="green" if m.verdict == "ok" else "red"),
                "bundled" if m is listing.bundled else (m.pulled or "-")[:10],
            ]
            for m in listed
        ]
        title = f"models in {listing.store}" if listing.models else None
        print_records(out, columns, rows, title=title)
    if listing.bundled:
        say(out, "bundled: the model run, chat and serve use when you give none", style="dim")
    for name in listing.partial:
        say(out, f"unfinished download: {name} (the same pull resumes it)", style="dim")
    for item in listing.unreadable:
        say(out, f"left out, not readable to you: {item}", style="yellow")
    if listing.warning:
        say(out, f"warning: {listing.warning}", style="yellow")


@app.command()
@STORE
@flags.JSON
@user_errors
def models(store: str | None, as_json: bool) -> None:
    """List the model store: size, quantization and whether llama.cpp can load each file."""
    from edgepilot.store.manifest import list_store, store_path

    emit(list_store(store_path(store)), as_json, render_models)


def render_removed(r: Removed, out: Console) -> None:
    from edgepilot.cli.narrow import say

    say(out, f"removed {r.name} ({human_bytes(r.bytes_freed)} freed)")


@app.command()
@click.argument(
    "name",
    help="A pulled model, exactly: OWNER__REPO/FILE as `models` lists it, OWNER/REPO:FILE, or a unique file "
    "name (no patterns)",
)
@STORE
@flags.JSON
@user_errors
def rm(name: str, store: str | None, as_json: bool) -> None:
    """Remove a model from the store (and its manifest entry); never touches files outside the store."""
    from edgepilot.store.manifest import remove, store_path

    emit(remove(store_path(store), name), as_json, render_removed)
