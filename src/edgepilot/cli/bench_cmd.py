"""`edgepilot bench` and `edgepilot tune`: thin CLI over edgepilot.bench (llama.cpp loads only to run)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from edgepilot.cli import flags
from edgepilot.cli.app import app, emit, err_console, user_errors
from edgepilot.cli.bench_progress import exit_if_stopped, progress_bar, said_stopped
from edgepilot.errors import UserError

if TYPE_CHECKING:
    from edgepilot.tuned.identity import MeasuredModel

CORES_HELP = (
    "CPU sets to pin the process to, one per value or separated by '/': all, big, fastK (the K fastest "
    "clusters), or a cpulist like 4-7 (default: no pinning)"
)
PLOT = click.option(
    "--plot",
    type=click.Path(path_type=Path),
    help="Also write the thread sweep (with --sustained: speed and temperature over time) as a PNG (needs "
    "matplotlib)",
    metavar="FILE",
)


def _output_format(as_json: bool, as_csv: bool, as_md: bool) -> str:
    chosen = [name for name, on in (("json", as_json), ("csv", as_csv), ("md", as_md)) if on]
    if len(chosen) > 1:
        raise UserError(f"choose one output format, not {' and '.join('--' + c for c in chosen)}")
    return chosen[0] if chosen else "table"


@app.command()
@flags.DEFAULT_MODEL
@click.option(
    "-p", "--n-prompt", default="512", help="Prompt sizes, e.g. 512 or 128,512 (0 = none)", metavar="LIST"
)
@click.option("-n", "--n-gen", default="128", help="Generation lengths, e.g. 128 (0 = none)", metavar="LIST")
@click.option("-r", "--repetitions", "reps", default=5, help="Repetitions of each test", metavar="N")
@click.option("-t", "--threads", help="Thread counts: 4, 2,4,8 or 1-8", metavar="LIST")
@click.option("-ub", "--ubatch", default="512", help="Physical batch sizes, e.g. 128,512", metavar="LIST")
@click.option("-fa", "--flash-attn", default="0", help="Flash attention: 0, 1 or 0,1", metavar="0|1|0,1")
@click.option(
    "--repack", default="1", help="CPU_REPACK of weights: 1, 0 or 0,1 (one load each)", metavar="1|0|0,1"
)
@click.option("--no-repack", is_flag=True, help="Same as --repack 0")
@click.option("--cores", "-C", multiple=True, help=CORES_HELP, metavar="SETS")
@click.option("-b", "--batch", default=2048, help="Logical batch size", metavar="N")
@flags.DEVICE
@click.option(
    "--gpu-layers",
    "-ngl",
    metavar="LIST",
    help="Layers offloaded to --device, e.g. 10,20,all (default: all on a device)",
)
@click.option(
    "--cooldown",
    default=0.0,
    help="Before each test wait up to this many seconds for the CPU to cool back to its starting temperature",
    metavar="SECONDS",
)
@click.option("--no-warmup", is_flag=True, help="Skip the warm-up run before each test")
@click.option(
    "--sustained",
    metavar="DURATION",
    help="Generate back to back for DURATION (e.g. 90s, 5m) and report the speed it holds, per window",
)
@click.option(
    "--window",
    type=float,
    help="With --sustained: seconds per window (default: a tenth, 2-10 s)",
    metavar="S",
)
@PLOT
@click.option("--history", is_flag=True, help="Show past results on this device and compare")
@click.option("--last", default=40, help="With --history: how many results to show", metavar="N")
@click.option("--no-save", is_flag=True, help="Do not keep the results in the history")
@flags.JSON
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV with llama-bench's columns")
@click.option("--md", "as_md", is_flag=True, help="Print a markdown table like llama-bench")
@flags.ENGINE
@flags.VERBOSE
@user_errors
def bench(
    model: str | None,
    n_prompt: str,
    n_gen: str,
    reps: int,
    threads: str | None,
    ubatch: str,
    flash_attn: str,
    repack: str,
    no_repack: bool,
    cores: tuple[str, ...],
    batch: int,
    device: str | None,
    gpu_layers: str | None,
    cooldown: float,
    no_warmup: bool,
    sustained: str | None,
    window: float | None,
    plot: Path | None,
    history: bool,
    last: int,
    no_save: bool,
    as_json: bool,
    as_csv: bool,
    as_md: bool,
    engine: str | None,
    verbose: bool,
) -> None:
    """Measure prompt (pp) and generation (tg) speed like llama-bench, pinned to chosen cores."""
    from edgepilot.bench.coresets import parse_core_sets
    from edgepilot.bench.ranges import parse_bool_list, parse_int_list
    from edgepilot.device.cpu import read_cpu
    from edgepilot.tuned.pinning import allowed_cpus

    fmt = _output_format(as_json, as_csv, as_md)
    from edgepilot.engine.choice import requested_engine

    requested_engine(engine)  # a bad --engine is reported before anything is measured
    if history:
        if fmt in ("csv", "md"):
            raise UserError("--history prints a table or --json")
        _history(model, last, as_json)
        return
    if sustained is not None:
        if fmt in ("csv", "md"):
            raise UserError("--sustained prints a table or --json")
        if plot is not None:
            _check_png(plot)
        from edgepilot.cli.sustained_cmd import sustained_bench

        sustained_bench(model, sustained, window, threads, no_save, as_json, engine, verbose, plot)
        return
    if window is not None:
        raise UserError("--window goes with --sustained")
    from edgepilot.bench.runner import BenchRequest
    from edgepilot.gguf.resolve import resolve_model

    allowed = allowed_cpus()
    cpu = read_cpu(Path("/"))
    request = BenchRequest(
        n_prompt=parse_int_list(n_prompt, "-p"),
        n_gen=parse_int_list(n_gen, "-n"),
        reps=reps,
        threads=parse_int_list(threads, "-t", minimum=1) if threads else [],
        ubatch=parse_int_list(ubatch, "-ub", minimum=1),
        flash_attn=parse_bool_list(flash_attn, "-fa"),
        repack=[False] if no_repack else parse_bool_list(repack, "--repack"),
        core_sets=parse_core_sets(list(cores), cpu, allowed) if cores else None,
        n_batch=batch,
        warmup=not no_warmup,
        cooldown=cooldown,
    ).validate()
    request.check_threads(cpu.cores or len(allowed))  # as run does, before the model or minutes of measuring
    path = resolve_model(model)
    request.device, request.gpu_layers = _offload(device, gpu_layers, path)
    request.validate()
    if plot is not None:
        _check_png(plot)
    if not no_save:
        from edgepilot.bench.store import check_writable

        check_writable()  # before minutes of measuring
    from edgepilot.bench.runner import run_bench

    with progress_bar("bench") as update:
        report = run_bench(path, request, progress=update, verbose=verbose, store=not no_save, engine=engine)
    said_stopped(report.partial)
    if plot is not None:
        from edgepilot.bench.plot import save_png, sweep_series
        from edgepilot.bench.runner import sweep_points

        report.plot_png = str(save_png(sweep_series(sweep_points(report)), plot, _title(report.model)))
    if fmt == "csv":
        from edgepilot.bench.formats import to_csv

        sys.stdout.write(to_csv(report))
    elif fmt == "md":
        from edgepilot.bench.formats import to_markdown

        sys.stdout.write(to_markdown(report))
    else:
        from edgepilot.cli.bench_render import render_bench

        emit(report, as_json, render_bench)
    exit_if_stopped(report.partial)


def _offload(device: str | None, gpu_layers: str | None, path: Path) -> tuple[str, list[int]]:
    """--device and --gpu-layers as llama-bench's -dev and -ngl list (all: the model's layers + output)."""
    from edgepilot.bench.ranges import parse_int_list
    from edgepilot.plan.requested import parse_device

    name = parse_device(device) or "none"
    if gpu_layers is None:
        if name == "none":
            return name, [0]
        gpu_layers = "all"
    parts = [p.strip().lower() for p in gpu_layers.split(",")]
    if "all" in parts:
        from edgepilot.gguf.arch import arch_params
        from edgepilot.gguf.verdict import header_of

        every = arch_params(header_of(path).metadata).n_layer + 1
        parts = [str(every) if p == "all" else p for p in parts]
    return name, parse_int_list(",".join(parts), "--gpu-layers")


def _history(model: str | None, last: int, as_json: bool) -> None:
    from edgepilot.bench.history import history
    from edgepilot.cli.bench_render import render_history
    from edgepilot.gguf.resolve import check_model_path
    from edgepilot.tuned.identity import device_id, model_id

    if last < 1:
        raise UserError("--last must be at least 1")
    device = device_id()
    key = label = None
    if model is not None:
        path = check_model_path(model)
        key, label = model_id(path).key, path.name
    emit(history(device.fingerprint, device.description, key, label, limit=last), as_json, render_history)


def _check_png(path: Path) -> None:
    if path.suffix.lower() != ".png":
        raise UserError(f"--plot {path}: give a file name ending in .png")
    if os.path.isdir(path):
        raise UserError(f"--plot {path} is a directory; give a file name ending in .png")
    if not os.path.isdir(path.parent):  # checked before measuring; folders are the user's to make
        raise UserError(f"--plot {path}: the folder {path.parent} does not exist")
    from edgepilot.file_errors import escaped, folder_refusal, reason

    refused = folder_refusal(path.parent)
    if refused is not None:
        raise UserError(
            f"cannot write --plot {escaped(path)}: {reason(refused)} in {escaped(path.parent)}; "
            "choose a folder you can write"
        )
    from edgepilot.bench.plot import check_matplotlib

    check_matplotlib()


def _title(model: MeasuredModel) -> str:
    return f"{model.name} · {model.type}".strip(" ·")


@app.command()
@flags.DEFAULT_MODEL
@click.option("-p", "--n-prompt", default=256, help="Prompt size each setting is measured with", metavar="N")
@click.option("-n", "--n-gen", default=32, help="Tokens generated per measurement", metavar="N")
@click.option("-r", "--repetitions", "reps", default=3, help="Repetitions per measurement", metavar="N")
@click.option(
    "--cooldown",
    default=0.0,
    help="Between settings wait up to this many seconds for the CPU to cool back to its starting temperature",
    metavar="SECONDS",
)
@PLOT
@click.option("--no-save", is_flag=True, help="Measure and report only: no profile, no history")
@click.option(
    "--no-repack", is_flag=True, help="Tune without weight repacking (default: measure whether it pays)"
)
@click.option(
    "--device",
    metavar="NAME|none|auto",
    help="A GPU to try against the tuned CPU settings (-dev NAME, several layer counts); none: the CPU "
    "only; auto (default): the GPUs llama.cpp lists that passed the driver check",
)
@click.option(
    "--sustained",
    metavar="DURATION",
    help="Then compare the best settings over DURATION of generation in turns (e.g. 5m) and keep the one "
    "with the best steady speed (serve prefers that profile)",
)
@click.option(
    "--window",
    type=float,
    help="With --sustained: seconds per window (default: 2-10 s)",
    metavar="S",
)
@click.option(
    "--speculation",
    is_flag=True,
    help="Then measure n-gram lookup (and --draft) against plain generation on llama-server per kind of "
    "text; the profile keeps what was 5 %+ faster",
)
@click.option(
    "--draft",
    help="With --speculation: a draft model to measure too (default: the same model at fewer bits next to "
    "it or in the model store; none: lookup only)",
    metavar="MODEL|none",
)
@click.option("--show", is_flag=True, help="Show the saved profile for this model here (nothing is measured)")
@click.option("--forget", is_flag=True, help="Remove the saved profile: run, chat and serve plan without it")
@flags.JSON
@flags.ENGINE
@flags.VERBOSE
@user_errors
def tune(
    model: str | None,
    n_prompt: int,
    n_gen: int,
    reps: int,
    cooldown: float,
    plot: Path | None,
    no_save: bool,
    no_repack: bool,
    device: str | None,
    sustained: str | None,
    window: float | None,
    speculation: bool,
    draft: str | None,
    show: bool,
    forget: bool,
    as_json: bool,
    engine: str | None,
    verbose: bool,
) -> None:
    """Find the fastest threads x cores, flash attention and ubatch here; save them for `run` and `serve`."""
    from edgepilot.bench.tune import TuneRequest, run_tune
    from edgepilot.bench.tune_report import sweep_points
    from edgepilot.cli.bench_render import render_tune
    from edgepilot.gguf.resolve import resolve_model

    if show or forget:
        from edgepilot.cli.bench_render import render_profile
        from edgepilot.tuned.profiles import forget_profile, show_profile

        if show and forget:
            raise UserError("give --show or --forget, not both")
        path = resolve_model(model)
        emit((forget_profile if forget else show_profile)(path), as_json, render_profile)
        return

    from edgepilot.bench.gpu_choice import devices_to_try
    from edgepilot.shown import shown

    if window is not None and sustained is None:
        raise UserError("--window goes with --sustained")
    request = TuneRequest(
        n_prompt, n_gen, reps, cooldown, save=not no_save, store=not no_save, repack=not no_repack
    )
    if sustained is not None:
        from edgepilot.bench.tune import SUSTAINED_ENGINE
        from edgepilot.engine.choice import requested_engine
        from edgepilot.sizes import parse_duration

        if requested_engine(engine) == "tools":  # before any driver check or measurement
            raise UserError(SUSTAINED_ENGINE)
        request.sustained_s = parse_duration(sustained, what="--sustained", minimum=2.0)
        request.window_s = window
    request.validate()
    if draft is not None and not speculation:
        raise UserError("--draft goes with --speculation")
    if speculation:
        request.speculation = flags.speculation_candidates(model, draft)
    request.devices, request.gpu_notes = devices_to_try(
        device, engine, lambda msg: err_console().print(shown(msg), style="dim", markup=False)
    )
    path = resolve_model(model)
    if plot is not None:
        _check_png(plot)
    if not no_save:  # before minutes of measuring
        from edgepilot.bench.store import NO_SAVE, check_writable
        from edgepilot.tuned.profiles import writable_profiles_dir

        writable_profiles_dir(also=NO_SAVE)
        check_writable()
    with progress_bar("tune") as update:
        report = run_tune(path, request, progress=update, verbose=verbose, engine=engine)
    said_stopped(report.partial)
    if plot is not None:
        from edgepilot.bench.plot import save_png, sweep_series

        report.plot_png = str(save_png(sweep_series(sweep_points(report)), plot, _title(report.model)))
    emit(report, as_json, render_tune)
    exit_if_stopped(report.partial)
