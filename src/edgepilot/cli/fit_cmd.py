"""`edgepilot fit`: thin CLI over the settings decision (edgepilot.tuned.decide), the same one `run` uses."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from edgepilot.cli import flags
from edgepilot.cli.app import app, emit, user_errors

if TYPE_CHECKING:
    from pathlib import Path

    from edgepilot.plan.requested import RequestedSettings


@app.command()
@flags.DEFAULT_MODEL
@flags.settings_flags
@flags.BUDGET
@click.option(
    "--root", default="/", show_default=True, help="Device tree or snapshot to plan for", metavar="DIR"
)
@flags.ENGINE
@flags.JSON
@user_errors
def fit(
    model: str | None,
    requested: RequestedSettings,
    budget: str | None,
    root: str,
    engine: str | None,
    as_json: bool,
) -> None:
    """Predict memory and pick the settings `edgepilot run` will use: never let the OS kill the run.
    The plan is for the llama.cpp that will run it here (--engine; a device tree gets the pinned one's)."""
    from edgepilot.cli.fit_render import render_fit
    from edgepilot.engine.choice import describe_engine
    from edgepilot.tuned.decide import decide

    info = describe_engine(engine, load=False, gpu=requested.wants_gpu)[0] if root == "/" else None
    path: str | Path | None = model
    if path is None:
        from edgepilot.gguf.resolve import bundled_model_path

        path = bundled_model_path()
    decision = decide(
        path, requested, root=root, budget_bytes=flags.size_or_none(budget), engine=info, opencl=True
    )
    emit(decision.plan, as_json, render_fit)
