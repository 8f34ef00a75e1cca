"""`edgepilot quantize` and `edgepilot compare`: thin CLIs over edgepilot.store.quantize / .compare."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import click

from edgepilot.cli import flags
from edgepilot.cli.app import app, emit, user_errors
from edgepilot.cli.format import mib

if TYPE_CHECKING:
    from rich.console import Console

    from edgepilot.store.compare import CompareResult
    from edgepilot.store.quantize import QuantizeResult


def _progress(message: str) -> None:
    from edgepilot.shown import shown

    sys.stderr.write(shown(message) + "\n")
    sys.stderr.flush()


@contextlib.contextmanager
def _steps(title: str) -> Iterator[Callable[[str], None]]:
    """Each step as a line on stderr; off a terminal also the current one every few seconds, as one
    quantization is a single silent call into llama.cpp (cli/progress.py)."""
    from edgepilot.cli.app import err_console

    if err_console().is_terminal:
        yield _progress
        return
    from edgepilot.cli.progress import PipeProgress

    with PipeProgress(title) as plain:

        def say(message: str) -> None:
            _progress(message)
            plain.update(message.strip())

        yield say


def render_quantize(result: QuantizeResult, out: Console) -> None:
    from edgepilot.cli.narrow import Column, print_command, print_records, say

    if result.reference_note:
        say(out, result.reference_note)
        say(out, f"  {result.reference}")
    columns = [
        Column("type"),
        Column("file"),
        Column("size", numeric=True),
        Column("bits/weight", numeric=True),
        Column("fallback tensors", numeric=True),
        Column("seconds", numeric=True),
    ]
    rows = [
        [
            v.type,
            v.path,
            mib(v.file_bytes),
            f"{v.bits_per_weight:.2f}",
            str(v.fallback_tensors),
            f"{v.seconds:.1f}",
        ]
        for v in result.variants
    ]
    print_records(out, columns, rows, title=f"variants of {result.source}")
    if any(v.fallback_tensors for v in result.variants):
        say(
            out,
            "fallback: tensors whose rows are not a multiple of the type's block (256 for k-quants) get "
            "another type (llama.cpp: Q4_K -> Q5_0, Q2_K/Q3_K -> Q4_0, Q6_K -> Q8_0)",
        )
    files = [result.reference or result.source] + [v.path for v in result.variants]
    print_command(out, "next:", ["edgepilot", "compare", *map(str, files)], style="")


def _kl(value: float | None) -> str:
    return "-" if value is None else f"{value:.5f}"


def render_compare(result: CompareResult, out: Console) -> None:
    from edgepilot.cli.narrow import Column, print_records, say

    say(out, result.reference_note)
    columns = [
        Column("file"),
        Column("type"),
        Column("size", numeric=True),
        Column("bits/w", numeric=True),
        Column("peak predicted", numeric=True),
        Column("peak measured", numeric=True),
        Column("error", numeric=True),
        Column("pp t/s", numeric=True),
        Column("tg t/s", numeric=True),
        Column("perplexity", numeric=True),
        Column("KL mean", numeric=True),
        Column("same top", numeric=True),
    ]
    rows = [
        [
            r.name + (" (ref)" if r.reference else "") + ("" if r.fits else " *"),
            r.file_type or "?",
            mib(r.file_bytes),
            f"{r.bits_per_weight:.2f}",
            mib(r.predicted_peak_bytes),
            mib(r.measured_peak_bytes),
            f"{r.peak_error:+.1%}",
            f"{r.pp_tps:.1f}",
            f"{r.tg_tps:.1f}",
            f"{r.perplexity:.3f} ± {r.ppl_stderr:.3f}",
            _kl(r.kl_mean),
            "-" if r.same_top is None else f"{r.same_top:.1%}",
        ]
        for r in sorted(result.rows, key=lambda r: -r.bits_per_weight)
    ]
    title = (
        f"ctx {result.n_ctx} (prompt fills it, then {result.n_gen} tokens) · quality on {result.text}: "
        f"{result.n_scored} tokens scored, chunks of {result.ppl_ctx}"
    )
    print_records(out, columns, rows, title=title)
    for note in result.notes:
        say(out, f"note: {note}")
    if result.plot:
        say(out, f"plot: {result.plot}")


@app.command()
@flags.MODEL
@click.option(
    "--to", "to", required=True, help="Types, comma-separated: Q8_0,Q6_K,Q4_K_M,Q3_K_M,...", metavar="TYPES"
)
@click.option("--out", "out_dir", help="Folder for the new files (default: next to MODEL)", metavar="DIR")
@click.option("--imatrix", help="Importance matrix from llama-imatrix (GGUF or legacy .dat)", metavar="FILE")
@click.option(
    "--threads",
    "-t",
    type=int,
    help="Quantizer threads (default: every CPU this process may use)",
    metavar="N",
)
@click.option("--force", is_flag=True, help="Overwrite output files that exist")
@click.option(
    "--pure",
    is_flag=True,
    help="Every tensor in the one type, output and embeddings too (llama-quantize --pure; what ggml's "
    "OpenCL kernels on Adreno are fast for, as Q4_0): MODEL-TYPE-pure.gguf",
)
@flags.ENGINE
@flags.JSON
@user_errors
def quantize(
    model: str,
    to: str,
    out_dir: str | None,
    imatrix: str | None,
    threads: int | None,
    force: bool,
    pure: bool,
    engine: str | None,
    as_json: bool,
) -> None:
    """Quantize a model with llama.cpp's quantizer into MODEL-TYPE.gguf files.

    A source that is already quantized is first dequantized to F16 (the reference `compare` measures against).
    """
    from edgepilot.store.quantize import quantize_model, split_types

    types = split_types(to)
    with _steps("quantize") as say:
        result = quantize_model(
            model, types, out_dir, imatrix, threads, force, on_progress=say, engine=engine, pure=pure
        )
    emit(result, as_json, render_quantize)


@app.command()
@click.argument("files", nargs=-1, required=True)
@click.option(
    "--text",
    "text_file",
    help="UTF-8 text for perplexity/KL (default: a public-domain text shipped)",
    metavar="FILE",
)
@click.option(
    "--ctx",
    "-c",
    type=int,
    default=512,
    show_default=True,
    help="Context of the memory run (filled)",
    metavar="N",
)
@click.option(
    "--ppl-ctx", type=int, default=256, show_default=True, help="Chunk size for perplexity/KL", metavar="N"
)
@click.option(
    "--chunks",
    type=int,
    default=4,
    show_default=True,
    help="At most this many chunks of the text",
    metavar="N",
)
@click.option(
    "--n-gen", type=int, default=32, show_default=True, help="Tokens generated for tg t/s", metavar="N"
)
@flags.THREADS
@click.option("--plot", help="Write a PNG (needs matplotlib: the `plot` extra)", metavar="FILE")
@flags.ENGINE
@flags.JSON
@user_errors
def compare(
    files: tuple[str, ...],
    text_file: str | None,
    ctx: int,
    ppl_ctx: int,
    chunks: int,
    n_gen: int,
    threads: int | None,
    plot: str | None,
    engine: str | None,
    as_json: bool,
) -> None:
    """Size, predicted and measured peak memory, speed and quality (perplexity, KL divergence against the most
    precise file) of model files, each measured in a process of its own."""
    from edgepilot.store.compare import compare_models

    with _steps("compare") as say:
        result = compare_models(
            list(files), text_file, ctx, ppl_ctx, chunks, n_gen, threads, plot, on_progress=say, engine=engine
        )
    emit(result, as_json, render_compare)
