"""The flags `run`, `fit` and `serve` share, defined once (same names, ranges and help everywhere)."""

from __future__ import annotations

import math

import typer

from edgepilot.errors import UserError
from edgepilot.plan.budget import parse_size


def check_range(flag: str, value: float | None, low: float, high: float) -> None:
    """One line and exit 2 (UserError) for NaN, infinity or a value outside [low, high]."""
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{flag} {value}: not a finite number")
    if not low <= value <= high:
        raise UserError(f"{flag} {value}: out of range ({_number(low)} to {_number(high)})")


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def size_or_none(text: str | None) -> int | None:
    return parse_size(text) if text is not None else None


DEFAULT_MODEL = typer.Argument(None, help="GGUF file (default: the bundled Gemma 3 270M Q4_K_M)")
CTX = typer.Option(None, "--ctx", "-c", help="Context size in tokens (default: 4096, or what fits)")
BATCH = typer.Option(None, "--batch", "-b", help="Logical batch size")
UBATCH = typer.Option(None, "--ubatch", "-ub", help="Physical batch size")
KV = typer.Option(None, "--kv", help="KV cache type: f16, q8_0, q4_0, ...")
FLASH_ATTN = typer.Option(None, "--flash-attn/--no-flash-attn", help="Flash attention")
THREADS = typer.Option(None, "--threads", "-t", help="CPU threads (default: one per big core)")
NO_MMAP = typer.Option(False, "--no-mmap", help="Read the model into memory instead of mapping it")
NO_REPACK = typer.Option(
    False, "--no-repack", help="No CPU_REPACK copies of weights (less memory, slower prompt processing)"
)
BUDGET = typer.Option(None, "--budget", help="Memory budget, e.g. 2GiB (default: measured)")
FORCE = typer.Option(False, "--force", help="Go ahead even when the plan predicts the OS would kill it")
JSON = typer.Option(False, "--json", help="Print one JSON object")
