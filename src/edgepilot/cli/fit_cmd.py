"""`edgepilot fit`: thin CLI over edgepilot.plan.fit.fit_model."""

from __future__ import annotations

import typer

from edgepilot.cli.app import app, emit, user_errors
from edgepilot.cli.fit_render import render_fit
from edgepilot.plan.budget import parse_size
from edgepilot.plan.fit import fit_model
from edgepilot.plan.requested import RequestedSettings


@app.command()
@user_errors
def fit(
    model: str = typer.Argument(..., help="GGUF file"),
    ctx: int | None = typer.Option(None, "--ctx", "-c", help="Context size (default: the largest that fits)"),
    batch: int | None = typer.Option(None, "--batch", "-b", help="Logical batch size"),
    ubatch: int | None = typer.Option(None, "--ubatch", "-ub", help="Physical batch size"),
    kv: str | None = typer.Option(None, "--kv", help="KV cache type: f16, q8_0, q4_0, ..."),
    flash_attn: bool | None = typer.Option(None, "--flash-attn/--no-flash-attn", help="Flash attention"),
    no_mmap: bool = typer.Option(False, "--no-mmap", help="Plan for reading the model into memory"),
    threads: int | None = typer.Option(None, "--threads", "-t", help="CPU threads"),
    budget: str | None = typer.Option(None, "--budget", help="Memory budget, e.g. 2GiB (default: measured)"),
    root: str = typer.Option("/", "--root", help="Device tree or snapshot to plan for"),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object"),
) -> None:
    """Predict memory and pick settings that fit this device: never let the OS kill the run."""
    requested = RequestedSettings.from_flags(ctx, batch, ubatch, kv, flash_attn, no_mmap, threads)
    budget_bytes = parse_size(budget) if budget is not None else None
    emit(fit_model(model, requested, budget_bytes=budget_bytes, root=root), as_json, render_fit)
