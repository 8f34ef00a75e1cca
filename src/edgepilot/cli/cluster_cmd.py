"""`edgepilot rpc-server` and `edgepilot cluster plan`: thin CLIs over edgepilot.cluster."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from edgepilot.cli import flags
from edgepilot.cli.app import app, console, emit, err_console, user_errors
from edgepilot.cli.format import mib
from edgepilot.defaults import DEFAULT_CTX

if TYPE_CHECKING:
    from rich.console import Console


@app.command("rpc-server")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (no auth!)", metavar="HOST"
)
@click.option("--port", default=50052, show_default=True, help="TCP port", metavar="PORT")
@click.option("--threads", type=int, help="CPU threads for the helper's computations", metavar="N")
@click.option("--dry-run", is_flag=True, help="Print the rpc-server command instead of running it")
@user_errors
def rpc_server(host: str, port: int, threads: int | None, dry_run: bool) -> None:
    """Lend this device's memory and CPU to a main device running `serve --rpc` (llama.cpp's rpc-server)."""
    from edgepilot.cluster.rpc_server import exec_rpc_server, rpc_server_command
    from edgepilot.shown import shell_word

    cmd = rpc_server_command(host, port, threads, planned=dry_run)
    err = err_console()
    for w in cmd.warnings:
        err.print(w, style="bold red", markup=False, soft_wrap=True)
    if dry_run:
        if cmd.missing:
            err.print(f"note: {cmd.missing}", style="dim", markup=False, soft_wrap=True)
        console().print(" ".join(map(shell_word, cmd.argv)), markup=False, soft_wrap=True)
        return
    err.print(f"rpc-server on {host}:{port} (Ctrl-C stops it)", style="dim", markup=False)
    exec_rpc_server(cmd)


@app.group()
def cluster() -> None:
    """Pool devices over llama.cpp's RPC backend."""


def render_plan(plan: Any, out: Console) -> None:
    from rich.text import Text

    from edgepilot.cli.narrow import Column, print_command, print_records, say
    from edgepilot.shown import shown
    from edgepilot.words import count

    verdict = "fits" if plan.fits else "DOES NOT FIT"
    out.print(
        Text.assemble(
            ("cluster plan", "bold"),
            f" {shown(Path(plan.model).name)} · {count(plan.n_layer, 'layer')} + output · ctx {plan.n_ctx}",
            f" · {verdict}",
        )
    )
    columns = [
        Column("device"),
        Column("layers", numeric=True),
        Column("weights", numeric=True),
        Column("KV", numeric=True),
        Column("predicted peak", numeric=True),
        Column("budget", numeric=True),
        Column("fits"),
    ]
    rows = [
        [
            s.name,
            f"{s.first_layer}-{s.end_layer - 1} ({s.n_layers})" if s.n_layers else "input only",
            mib(s.weights_bytes),
            mib(s.kv_bytes),
            mib(s.predicted_peak_bytes),
            mib(s.budget_bytes) if s.budget_bytes is not None else "?",
            "yes" if s.fits else "OVER BUDGET",
        ]
        for s in ([plan.main] if plan.main is not None else []) + plan.helpers
    ]
    print_records(out, columns, rows)
    if plan.suggestions:
        say(out, "the smallest change that would fit: " + plan.suggestions[0], style="bold")
        for other in plan.suggestions[1:]:
            say(out, f"  or: {other}", style="dim")
    if plan.fits:
        say(out, "on each helper:", style="dim")
        for cmd in plan.helper_commands:
            print_command(out, "", cmd, style="")
        say(
            out, "on the main device (llama.cpp's server, or the same behind edgepilot's front):", style="dim"
        )
        for cmd in (plan.main_command, plan.edgepilot_command):
            print_command(out, "", cmd, style="")
    else:  # commands that would be killed are not something to copy and run
        say(out, "no commands: the plan does not fit (--json lists them as planned)", style="bold red")
    for note in plan.notes:
        say(out, f"note: {note}", style="dim")
    if plan.link is not None:
        if plan.link.speed_detail:
            say(out, f"one device's speed: {plan.link.speed_detail}", style="dim")
        say(out, plan.link.summary, style="" if plan.link.pool_is_faster else "bold red")


@cluster.command("plan")
@flags.MODEL
@click.option(
    "--helper",
    "helpers",
    multiple=True,
    required=True,
    help="HOST:PORT=BUDGET or HOST:PORT=ROOT (a device tree or snapshot .tar.gz of that helper); in --rpc "
    "order",
    metavar="HOST:PORT=BUDGET",
)
@click.option("--ctx", default=DEFAULT_CTX, show_default=True, help="Context size", metavar="N")
@click.option("--kv", default="f16", show_default=True, help="KV cache type", metavar="TYPE")
@click.option(
    "--main-budget", help="The main device's memory budget (default: what `fit` plans on it)", metavar="SIZE"
)
@click.option(
    "--root",
    default="/",
    show_default=True,
    help="The main device's tree or snapshot to probe",
    metavar="DIR",
)
@click.option(
    "--link",
    help="Predict the speed over this link: LATENCY,RATE (10ms,50Mbit) or usb, wifi, poor-wifi",
    metavar="LINK",
)
@click.option(
    "--speed",
    help="With --link: this model's GEN,PROMPT t/s on one device (default: the bench history, else the "
    "roofline)",
    metavar="GEN,PROMPT",
)
@flags.JSON
@user_errors
def plan(
    model: str,
    helpers: tuple[str, ...],
    ctx: int,
    kv: str,
    main_budget: str | None,
    root: str,
    link: str | None,
    speed: str | None,
    as_json: bool,
) -> None:
    """Split a model's layers over the main device and RPC helpers by their memory budgets; print every
    command to run. Exit status 1 when it does not fit (with the smallest change that would)."""
    from edgepilot.cluster.link import parse_link
    from edgepilot.cluster.link_plan import parse_speed
    from edgepilot.cluster.plan import MIN_BUDGET, parse_helper, plan_cluster
    from edgepilot.errors import UserError
    from edgepilot.plan.settings import kv_type_id
    from edgepilot.sizes import parse_size

    kv_type_id(kv)
    kv = kv.lower()
    flags.check_range("--ctx", ctx, 16, 1 << 30)
    if speed is not None and link is None:
        raise UserError("--speed goes with --link: the speed on one device, the link to predict over")
    the_link = parse_link(link) if link is not None else None
    the_speed = parse_speed(speed) if speed is not None else None
    main = None if main_budget is None else parse_size(main_budget, what="--main-budget", minimum=MIN_BUDGET)
    parsed = [parse_helper(h) for h in helpers]
    result = plan_cluster(model, parsed, n_ctx=ctx, kv=kv, main_budget=main, root=root)
    if the_link is not None:
        from edgepilot.cli.cluster_link import predict_link

        predict_link(result, the_link, the_speed, ctx, kv, main, root)
    emit(result, as_json, render_plan)
    if not result.fits:
        raise click.exceptions.Exit(1)
