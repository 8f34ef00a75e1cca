"""`edgepilot fit`: thin CLI over the settings decision (edgepilot.tuned.decide), the same one `run` uses."""

from __future__ import annotations

import typer

from edgepilot.cli import flags
from edgepilot.cli.app import app, emit, user_errors
from edgepilot.cli.fit_render import render_fit
from edgepilot.plan.requested import RequestedSettings
from edgepilot.tuned.decide import decide


@app.command()
@user_errors
def fit(
    model: str = typer.Argument(..., help="GGUF file"),
    ctx: int | None = flags.CTX,
    batch: int | None = flags.BATCH,
    ubatch: int | None = flags.UBATCH,
    kv: str | None = flags.KV,
    flash_attn: bool | None = flags.FLASH_ATTN,
    threads: int | None = flags.THREADS,
    no_mmap: bool = flags.NO_MMAP,
    no_repack: bool = flags.NO_REPACK,
    budget: str | None = flags.BUDGET,
    root: str = typer.Option("/", "--root", help="Device tree or snapshot to plan for"),
    as_json: bool = flags.JSON,
) -> None:
    """Predict memory and pick the settings `edgepilot run` will use: never let the OS kill the run."""
    requested = RequestedSettings.from_flags(ctx, batch, ubatch, kv, flash_attn, no_mmap, threads, no_repack)
    decision = decide(model, requested, root=root, budget_bytes=flags.size_or_none(budget))
    emit(decision.plan, as_json, render_fit)
