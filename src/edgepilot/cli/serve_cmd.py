"""`edgepilot serve`: thin CLI over edgepilot.serve.server.serve."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from edgepilot.cli import flags
from edgepilot.cli.app import app, console, err_console, user_errors
from edgepilot.cli.format import mib
from edgepilot.errors import UserError

if TYPE_CHECKING:
    from rich.console import Console

    from edgepilot.plan.requested import RequestedSettings
    from edgepilot.serve.server import ServeStarted, ServeStopped

PRESSURE_PSI = 10.0  # plan.budget.PRESSURE_PSI, kept equal by a test (importing plan here costs start-up)
DEFAULT_SHORT_CTX = 1024  # serve.config's, kept equal by the same test


def _log(message: str) -> None:
    from edgepilot.shown import shown

    line = f"{time.strftime('%H:%M:%S')} {shown(message)}"
    err_console().print(line, markup=False, soft_wrap=True, style="dim")


def render_started(s: ServeStarted, out: Console | None = None) -> None:
    from rich.text import Text

    from edgepilot.cli.narrow import print_items, say
    from edgepilot.shown import shown
    from edgepilot.words import count

    st = s.settings
    out = out or console()
    print_items(
        out,
        [
            Text.assemble(("edgepilot serve", "bold"), f" {shown(s.model_name)}"),
            f"ctx {st.n_ctx}",
            count(st.n_threads, "thread"),
            f"kv {st.type_k}/{st.type_v}",
            f"planned peak {mib(s.predicted_peak_rss_bytes)} of a {mib(s.budget_bytes)} budget",
        ],
    )
    say(out, f"listening on {s.url}  (OpenAI base URL {s.base_url}, status page {s.url})")
    out.print(
        "API key required: Authorization: Bearer <key>"
        if s.api_key_required
        else "no API key: only this device can connect",
        style="dim",
        markup=False,
    )
    for warning in s.warnings:
        say(out, f"warning: {warning}", style="yellow")
    for note in s.notes:
        say(out, f"note: {note}", style="dim")
    if s.wake_lock:
        out.print("Termux wake lock held until the server stops", style="dim")
    out.print("Ctrl-C stops the server", style="dim")


def render_stopped(s: ServeStopped) -> None:
    answered = s.requests.get("ok", 0)
    err_console().print(
        f"stopped after {s.uptime_seconds:.0f} s: {answered} request{'' if answered == 1 else 's'} answered, "
        f"{s.restarts} restart{'' if s.restarts == 1 else 's'}",
        style="dim",
    )


def _engine_kind(engine: str | None, gpu: bool) -> str:
    from edgepilot.engine.choice import choose_engine

    return choose_engine("tools" if engine == "llama-server" else engine, gpu=gpu).kind


@app.command()
@flags.DEFAULT_MODEL
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (non-loopback needs a key)",
    metavar="HOST",
)
@click.option("--port", default=8080, show_default=True, help="TCP port (0 picks a free one)", metavar="PORT")
@click.option("--api-key", help="Require this key (shows in `ps`: prefer a file)", metavar="KEY")
@click.option("--api-key-file", help="Read the required key from a file", metavar="FILE")
@flags.settings_flags
@flags.speculation_flags
@flags.BUDGET
@click.option(
    "--max-queue",
    default=8,
    show_default=True,
    help="Requests that may wait while one generates",
    metavar="N",
)
@click.option(
    "--max-tokens", default=512, show_default=True, help="Upper bound on a request's max_tokens", metavar="N"
)
@click.option(
    "--max-body", default="1MiB", show_default=True, help="Largest request body accepted", metavar="SIZE"
)
@click.option(
    "--max-messages", default=256, show_default=True, help="Most messages in one chat request", metavar="N"
)
@click.option(
    "--max-prompt-chars",
    default=0,
    show_default=True,
    help="Most characters of prompt in one request (0: 32 per token of the context)",
    metavar="N",
)
@click.option(
    "--max-prompt-tokens",
    default=0,
    show_default=True,
    help="Most prompt tokens processed for one request (0: the context; older chat turns are dropped to fit)",
    metavar="N",
)
@click.option(
    "--short-lane",
    default=DEFAULT_SHORT_CTX,
    show_default=True,
    help="Context of a second lane that answers short requests while a long one runs (0: none)",
    metavar="N",
)
@click.option(
    "--psi-limit",
    default=PRESSURE_PSI,
    show_default=True,
    help="Memory PSI avg10 % pausing new requests",
    metavar="PERCENT",
)
@click.option("--min-available", help="Pause new requests below this", metavar="SIZE")
@flags.FORCE
@flags.NO_PRELOAD
@flags.NO_CACHE_REUSE
@flags.MAX_TEMP
@click.option("--watch-root", default="/", hidden=True, help="Device tree to watch", metavar="DIR")
@click.option(
    "--verbose", "-v", is_flag=True, help="Also log status-page and /health requests, and the worker's output"
)
@click.option("--quiet", "-q", is_flag=True, help="No line per request on stderr")
@click.option("--json", "as_json", is_flag=True, help="One JSON line once the model answers")
@click.option(
    "--engine",
    help="The worker: auto (default: in-process when llama-cpp-python loads, else llama-server), inprocess, "
    "or tools (= llama-server: built by `edgepilot build` or installed, e.g. Termux's llama-cpp)",
    metavar="auto|inprocess|tools",
)
@click.option(
    "--rpc",
    help="HOST:PORT,... of `edgepilot rpc-server` helpers (implies --engine llama-server)",
    metavar="HOST:PORT,...",
)
@click.option(
    "--tensor-split",
    help="Share of the layers per --rpc helper (see `edgepilot cluster plan`)",
    metavar="SHARES",
)
@click.option(
    "--override-tensor",
    help="llama.cpp's -ot PATTERN=BUFFER_TYPE with --rpc, e.g. token_embd\\.weight=CPU: a tied output "
    "stays on this device (see `edgepilot cluster plan`)",
    metavar="PATTERN=TYPE",
)
@click.option(
    "--cache-reuse",
    type=int,
    help="llama-server's --cache-reuse N (prompt cache by KV shifting)",
    metavar="N",
)
@click.option(
    "--header-timeout",
    default=10.0,
    show_default=True,
    help="Seconds for a request's head",
    metavar="SECONDS",
)
@click.option(
    "--body-timeout", default=30.0, show_default=True, help="Seconds for a request's body", metavar="SECONDS"
)
@user_errors
def serve(
    model: str | None,
    host: str,
    port: int,
    api_key: str | None,
    api_key_file: str | None,
    requested: RequestedSettings,
    speculation: Any,
    budget: str | None,
    max_queue: int,
    max_tokens: int,
    max_body: str,
    max_messages: int,
    max_prompt_chars: int,
    max_prompt_tokens: int,
    short_lane: int,
    psi_limit: float,
    min_available: str | None,
    force: bool,
    no_preload: bool,
    no_cache_reuse: bool,
    max_temp: str | None,
    watch_root: str,
    verbose: bool,
    quiet: bool,
    as_json: bool,
    engine: str | None,
    rpc: str | None,
    tensor_split: str | None,
    override_tensor: str | None,
    cache_reuse: int | None,
    header_timeout: float,
    body_timeout: float,
) -> None:
    """Serve the model with an OpenAI-compatible API that stays up and stays private."""
    from edgepilot.engine.thermal_guard import parse_max_temp
    from edgepilot.jsonable import to_jsonable
    from edgepilot.serve.config import ServeConfig, key_file_warning, read_api_key
    from edgepilot.sizes import GIB, KIB, parse_size

    max_temp_c = parse_max_temp(max_temp)
    flags.check_range("--psi-limit", psi_limit, 0.0, 100.0)  # NaN too; ServeConfig checks the rest
    flags.check_range("--max-prompt-chars", max_prompt_chars, 0, 1 << 30)
    flags.check_range("--max-prompt-tokens", max_prompt_tokens, 0, 1 << 30)
    from edgepilot.engine.rpc_args import parse_override_tensor, parse_rpc, parse_tensor_split
    from edgepilot.plan.requested import ALL_LAYERS
    from edgepilot.serve.server import NativeEngine
    from edgepilot.serve.server import serve as run_server

    helpers = parse_rpc(rpc)
    if tensor_split and not helpers:
        raise UserError("--tensor-split needs --rpc HOST:PORT,...")
    if override_tensor is not None and not helpers:
        raise UserError("--override-tensor needs --rpc HOST:PORT,...")
    gpu_layers = None
    if helpers:  # --gpu-layers: the layers the --rpc helpers hold, output included (the rest stay here)
        gpu_layers = requested.n_gpu_layers if requested.n_gpu_layers != ALL_LAYERS else None
        flags.check_range("--gpu-layers", gpu_layers, 1, 1 << 20)
        if requested.device is not None:
            raise UserError("--device with --rpc: the helpers are the devices; leave --device out")
        requested = replace(requested, n_gpu_layers=None)
    native = None
    if _is_auto(speculation):  # what tune kept for chat text (its sustained profile first), or plain
        speculation = _auto_for_serve(model, speculation, engine, requested.wants_gpu)
    if speculation is not None:  # llama-server speculates; edgepilot's own worker does not yet
        from edgepilot.engine.speculation import speculating_engine

        engine = speculating_engine(engine, speculation)
        if _engine_kind(engine, requested.wants_gpu) != "tools":
            raise speculation.not_in_process()
    if helpers or cache_reuse is not None or _engine_kind(engine, requested.wants_gpu) == "tools":
        flags.check_range("--cache-reuse", cache_reuse, 0, 1 << 30)
        native = NativeEngine(
            helpers,
            parse_tensor_split(tensor_split, len(helpers)),
            cache_reuse,
            gpu_layers,
            parse_override_tensor(override_tensor),
            speculation,
        )

    config = ServeConfig(
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        host=host,
        port=port,
        api_key=read_api_key(api_key, api_key_file),
        max_queue=max_queue,
        max_tokens=max_tokens,
        max_body_bytes=parse_size(max_body, what="--max-body", minimum=KIB, maximum=GIB),
        max_messages=max_messages,
        max_prompt_chars=max_prompt_chars or None,
        max_prompt_tokens=max_prompt_tokens or None,
        short_lane_ctx=short_lane,
        psi_limit=psi_limit,
        min_available_bytes=flags.size_or_none(min_available, "--min-available"),
        watch_root=Path(watch_root),
        max_temp_c=max_temp_c,
        cache_reuse=not no_cache_reuse,
        verbose=verbose,
        quiet=quiet,
    )
    warning = key_file_warning(api_key_file)
    if warning:
        _log(f"warning: {warning}")

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
            native=native,
            warm=not no_preload,
        )
    except UserError as exc:
        plan = getattr(exc, "plan", None)  # DoesNotFit: show the plan that was refused
        if plan is not None:
            from edgepilot.cli.fit_render import render_fit

            render_fit(plan, err_console())
        raise
    render_stopped(stopped)


def _is_auto(speculation: Any) -> bool:
    from edgepilot.tuned.speculation_auto import AutoSpeculation

    return isinstance(speculation, AutoSpeculation)


def _auto_for_serve(model: str | None, auto: Any, engine: str | None, wants_gpu: bool) -> Any:
    """--draft auto in serve: the profile's kept speculation for chat text, said in the log; plain where
    this serve's engine could not run it (edgepilot's own worker speculates not yet)."""
    from edgepilot.engine.speculation import speculating_engine
    from edgepilot.gguf.resolve import resolve_model
    from edgepilot.tuned.speculation_auto import resolve_auto

    speculation, note = resolve_auto(auto, resolve_model(model), "chat", sustained=True)
    engine_kind = _engine_kind(speculating_engine(engine, speculation), wants_gpu)
    if speculation is not None and engine_kind != "tools":
        why = f"{speculation.describe()} runs on llama-server: add --engine tools"
        speculation, note = None, f"--draft auto: plain generation ({why})"
    if note:
        _log(note)
    return speculation
