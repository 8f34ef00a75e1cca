"""The flags `run`, `fit` and `serve` share, defined once (same names, ranges and help everywhere)."""

from __future__ import annotations

import math

import typer

from edgepilot.plan.budget import parse_size

# llama.cpp keeps context and batch sizes in uint32: a larger value would silently wrap around.
MAX_TOKENS_SETTING = 1 << 30


def finite(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def size_or_none(text: str | None) -> int | None:
    return parse_size(text) if text is not None else None


DEFAULT_MODEL = typer.Argument(None, help="GGUF file (default: the bundled Gemma 3 270M Q4_K_M)")
CTX = typer.Option(
    None,
    "--ctx",
    "-c",
    min=16,
    max=MAX_TOKENS_SETTING,
    help="Context size in tokens (default: 4096, or what fits)",
)
BATCH = typer.Option(None, "--batch", "-b", min=1, max=MAX_TOKENS_SETTING, help="Logical batch size")
UBATCH = typer.Option(None, "--ubatch", "-ub", min=1, max=MAX_TOKENS_SETTING, help="Physical batch size")
KV = typer.Option(None, "--kv", help="KV cache type: f16, q8_0, q4_0, ...")
FLASH_ATTN = typer.Option(None, "--flash-attn/--no-flash-attn", help="Flash attention")
THREADS = typer.Option(None, "--threads", "-t", min=1, help="CPU threads (default: one per big core)")
NO_MMAP = typer.Option(False, "--no-mmap", help="Read the model into memory instead of mapping it")
NO_REPACK = typer.Option(
    False, "--no-repack", help="No CPU_REPACK copies of weights (less memory, slower prompt processing)"
)
BUDGET = typer.Option(None, "--budget", help="Memory budget, e.g. 2GiB (default: measured)")
FORCE = typer.Option(False, "--force", help="Go ahead even when the plan predicts the OS would kill it")
JSON = typer.Option(False, "--json", help="Print one JSON object")
