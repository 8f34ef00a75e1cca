"""`edgepilot serve`: thin CLI over edgepilot.serve.server.serve."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from edgepilot.cli import flags
from edgepilot.cli.app import app, console, err_console, user_errors
from edgepilot.cli.format import mib
from edgepilot.errors import UserError
from edgepilot.jsonable import to_jsonable
from edgepilot.plan.budget import PRESSURE_PSI, parse_size
from edgepilot.plan.requested import RequestedSettings

if TYPE_CHECKING:
    from edgepilot.serve.server import ServeStarted, ServeStopped


def _log(message: str) -> None:
    err_console.print(f"{time.strftime('%H:%M:%S')} {message}", markup=False, soft_wrap=True, style="dim")


def render_started(s: ServeStarted) -> None:
    st = s.settings
    console.print(
        f"[bold]edgepilot serve[/] {s.model_name} · ctx {st.n_ctx} · {st.n_threads} threads · "
        f"kv {st.type_k}/{st.type_v} · planned peak {mib(s.predicted_peak_rss_bytes)} "
        f"of a {mib(s.budget_bytes)} budget",
        soft_wrap=True,
    )
    console.print(
        f"listening on {s.url}  (OpenAI base URL {s.base_url}, status page {s.url})",
        soft_wrap=True,
    )
    console.print(
        "API key required: Authorization: Bearer <key>"
        if s.api_key_required
        else "no API key: only this device can connect",
        style="dim",
    )
    for note in s.notes:
        console.print(f"note: {note}", style="dim", markup=False, soft_wrap=True)
    if s.wake_lock:
        console.print("Termux wake lock held until the server stops", style="dim")
    console.print("Ctrl-C stops the server", style="dim")


def render_stopped(s: ServeStopped) -> None:
    answered = s.requests.get("ok", 0)
    err_console.print(
        f"stopped after {s.uptime_seconds:.0f} s: {answered} request{'' if answered == 1 else 's'} answered, "
        f"{s.restarts} restart{'' if s.restarts == 1 else 's'}",
        style="dim",
    )


@app.command()
@user_errors
def serve(
    model: str | None = flags.DEFAULT_MODEL,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (non-loopback needs a key)"),
    port: int = typer.Option(8080, "--port", help="TCP port (0 picks a free one)"),
    api_key: str | None = typer.Option(
        None, "--api-key", help="Require this key (shows in `ps`: prefer a file)"
    ),
    api_key_file: str | None = typer.Option(None, "--api-key-file", help="Read the required key from a file"),
    ctx: int | None = flags.CTX,
    batch: int | None = flags.BATCH,
    ubatch: int | None = flags.UBATCH,
    kv: str | None = flags.KV,
    flash_attn: bool | None = flags.FLASH_ATTN,
    threads: int | None = flags.THREADS,
    no_mmap: bool = flags.NO_MMAP,
    no_repack: bool = flags.NO_REPACK,
    budget: str | None = flags.BUDGET,
    max_queue: int = typer.Option(8, "--max-queue", help="Requests that may wait while one generates"),
    max_tokens: int = typer.Option(512, "--max-tokens", help="Upper bound on a request's max_tokens"),
    max_body: str = typer.Option("1MiB", "--max-body", help="Largest request body accepted"),
    psi_limit: float = typer.Option(
        PRESSURE_PSI,
        "--psi-limit",
        help="Memory PSI avg10 % pausing new requests",
    ),
    min_available: str | None = typer.Option(None, "--min-available", help="Pause new requests below this"),
    force: bool = flags.FORCE,
    watch_root: str = typer.Option("/", "--watch-root", hidden=True, help="Device tree to watch"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log each request and the worker's output"),
    as_json: bool = typer.Option(False, "--json", help="One JSON line once the model answers"),
    header_timeout: float = typer.Option(10.0, "--header-timeout", help="Seconds for a request's head"),
    body_timeout: float = typer.Option(30.0, "--body-timeout", help="Seconds for a request's body"),
) -> None:
    """Serve the model with an OpenAI-compatible API that stays up and stays private."""
    from edgepilot.serve.config import ServeConfig, key_file_warning, read_api_key

    flags.check_range("--psi-limit", psi_limit, 0.0, 100.0)  # NaN too; ServeConfig checks the rest
    from edgepilot.serve.server import serve as run_server

    config = ServeConfig(
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        host=host,
        port=port,
        api_key=read_api_key(api_key, api_key_file),
        max_queue=max_queue,
        max_tokens=max_tokens,
        max_body_bytes=parse_size(max_body),
        psi_limit=psi_limit,
        min_available_bytes=parse_size(min_available) if min_available is not None else None,
        watch_root=Path(watch_root),
        verbose=verbose,
    )
    warning = key_file_warning(api_key_file)
    if warning:
        _log(f"warning: {warning}")
    requested = RequestedSettings.from_flags(ctx, batch, ubatch, kv, flash_attn, no_mmap, threads, no_repack)

    def ready(started: ServeStarted) -> None:
        if as_json:
            sys.stdout.write(json.dumps(to_jsonable(started)) + "\n")
            sys.stdout.flush()
        else:
            render_started(started)

    try:
        stopped = run_server(
            model,
            requested,
            config,
            budget_bytes=flags.size_or_none(budget),
            force=force,
            on_ready=ready,
            log=_log,
        )
    except UserError as exc:
        plan = getattr(exc, "plan", None)  # DoesNotFit: show the plan that was refused
        if plan is not None:
            from edgepilot.cli.fit_render import render_fit

            render_fit(plan, err_console)
        raise
    render_stopped(stopped)


__all__ = ["serve"]
