"""`edgepilot fit`: thin CLI over the settings decision (edgepilot.tuned.decide), the same one `run` uses."""

from __future__ import annotations

import click

from edgepilot.cli import flags
from edgepilot.cli.app import app, emit, user_errors


@app.command()
@flags.MODEL
@flags.settings_flags
@flags.BUDGET
@click.option("--root", default="/", show_default=True, help="Device tree or snapshot to plan for")
@flags.JSON
@user_errors
def fit(
    model: str,
    ctx: int | None,
    batch: int | None,
    ubatch: int | None,
    kv: str | None,
    flash_attn: bool | None,
    threads: int | None,
    no_mmap: bool,
    no_repack: bool,
    budget: str | None,
    root: str,
    as_json: bool,
) -> None:
    """Predict memory and pick the settings `edgepilot run` will use: never let the OS kill the run."""
    from edgepilot.cli.fit_render import render_fit
    from edgepilot.plan.requested import RequestedSettings
    from edgepilot.tuned.decide import decide

    requested = RequestedSettings.from_flags(ctx, batch, ubatch, kv, flash_attn, no_mmap, threads, no_repack)
    decision = decide(model, requested, root=root, budget_bytes=flags.size_or_none(budget))
    emit(decision.plan, as_json, render_fit)
