"""`edgepilot fit`: thin CLI over the settings decision (edgepilot.tuned.decide), the same one `run` uses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
@flags.speculation_flags
@flags.JSON
@user_errors
def fit(
    model: str | None,
    requested: RequestedSettings,
    budget: str | None,
    root: str,
    engine: str | None,
    speculation: Any,
    as_json: bool,
) -> None:
    """Predict memory and pick the settings `edgepilot run` will use: never let the OS kill the run.
    The plan is for the llama.cpp that will run it here (--engine; a device tree gets the pinned one's)."""
    from edgepilot.cli.fit_render import render_fit
    from edgepilot.engine.choice import describe_engine
    from edgepilot.tuned.decide import decide

    path: str | Path | None = model
    if path is None:
        from edgepilot.gguf.resolve import bundled_model_path

        path = bundled_model_path()
    auto_note = None
    if speculation is not None:  # planned as run would run it: on llama-server unless an engine is named
        from pathlib import Path

        from edgepilot.engine.speculation import speculating_engine
        from edgepilot.tuned.speculation_auto import resolve_auto

        speculation, auto_note = resolve_auto(speculation, Path(path), "chat", Path(root))
        if root == "/" and speculating_engine(engine, speculation) != engine and _has_llama_server():
            engine = "tools"  # else the plan is the pinned llama.cpp's, as for a device tree
    info = describe_engine(engine, load=False, gpu=requested.wants_gpu)[0] if root == "/" else None
    decision = decide(
        path, requested, root=root, budget_bytes=flags.size_or_none(budget), engine=info, opencl=True,
        speculation=speculation,
    )  # fmt: skip
    if auto_note:
        decision.plan.notes.append(auto_note)
    emit(decision.plan, as_json, render_fit)


def _has_llama_server() -> bool:
    from edgepilot.engine.native_tools import ToolMissing, find_tool

    try:
        return find_tool("llama-server") is not None
    except ToolMissing:
        return False
