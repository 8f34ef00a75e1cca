"""The flags `run`, `fit` and `serve` share, defined once (same names, ranges and help everywhere)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, TypeVar

import click

from edgepilot.defaults import DEFAULT_CTX
from edgepilot.errors import UserError

F = TypeVar("F", bound=Callable[..., Any])


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


MIN_BUDGET = 1 << 20  # no model loads in less; "0.1", "0.5B" or "1e-30GiB" is a slip, not a budget


def size_or_none(text: str | None, what: str = "--budget", minimum: int = MIN_BUDGET) -> int | None:
    """A size flag (by default --budget), bounded: one line and exit 2 for anything else."""
    from edgepilot.sizes import parse_size

    return parse_size(text, what=what, minimum=minimum) if text is not None else None


# Each is a decorator that adds a fresh parameter to the command it decorates.
DEFAULT_MODEL = click.argument(
    "model", required=False, help="GGUF file (default: the bundled Gemma 3 270M Q4_K_M)"
)
MODEL = click.argument("model", help="GGUF file")
CTX = click.option(
    "--ctx",
    "-c",
    type=int,
    help=f"Context size in tokens (default: {DEFAULT_CTX}, or what fits)",
    metavar="N",
)
BATCH = click.option("--batch", "-b", type=int, help="Logical batch size", metavar="N")
UBATCH = click.option("--ubatch", "-ub", type=int, help="Physical batch size", metavar="N")
KV = click.option("--kv", help="KV cache type: f16, q8_0, q4_0, ...", metavar="TYPE")
FLASH_ATTN = click.option("--flash-attn/--no-flash-attn", default=None, help="Flash attention")
THREADS = click.option(
    "--threads", "-t", type=int, help="CPU threads (default: one per big core)", metavar="N"
)
NO_MMAP = click.option("--no-mmap", is_flag=True, help="Read the model into memory instead of mapping it")
NO_REPACK = click.option(
    "--no-repack",
    is_flag=True,
    help="No CPU_REPACK copies of weights (less memory, slower prompt processing)",
)
NO_PROFILE = click.option(
    "--no-profile",
    is_flag=True,
    help="Leave out the profile `edgepilot tune` saved for this model (threads, ubatch, flash attention)",
)
DEVICE = click.option(
    "--device",
    metavar="NAME|none|auto",
    help="llama.cpp's -dev: none (the CPU), a GPU llama.cpp lists (Vulkan0: `edgepilot probe`), or auto "
    "(the tuned profile's choice, else the CPU)",
)
GPU_LAYERS = click.option(
    "--gpu-layers",
    "-ngl",
    metavar="N|all|auto",
    help="Layers offloaded to --device (llama.cpp's -ngl; default: all on a named device, none on the CPU)",
)
NO_PRELOAD = click.option(
    "--no-preload",
    is_flag=True,
    help="Do not read the model into the page cache before the first request",
)
BUDGET = click.option("--budget", help="Memory budget, e.g. 2GiB (default: measured)", metavar="SIZE")
FORCE = click.option(
    "--force", is_flag=True, help="Go ahead even when the plan predicts the OS would kill it"
)
NO_CACHE_REUSE = click.option(
    "--no-cache-reuse",
    is_flag=True,
    help="Process every prompt whole instead of reusing the KV cache of the previous one (for comparisons)",
)
ENGINE = click.option(
    "--engine",
    help="auto (default: in-process when llama-cpp-python loads, else llama.cpp's programs), inprocess or "
    "tools; default from $EDGEPILOT_ENGINE",
    metavar="auto|inprocess|tools",
)
MAX_TEMP = click.option(
    "--max-temp",
    help="Above this CPU temperature (°C), generate on half the threads until it is 5 °C lower "
    "(in-process engine; llama-server only warns)",
    metavar="C",
)
# the device whose sensors --max-temp reads (a device tree in tests)
WATCH_ROOT = click.option(
    "--watch-root", default="/", hidden=True, help="Device tree to watch", metavar="DIR"
)
JSON = click.option("--json", "as_json", is_flag=True, help="Print one JSON object")
VERBOSE = click.option("--verbose", "-v", is_flag=True, help="Show llama.cpp's own log")


def settings_flags(func: F) -> F:
    """--ctx, --batch, --ubatch, --kv, --flash-attn, --threads, --no-mmap, --no-repack, --no-profile,
    --device and --gpu-layers, in that order, handed to the command as one `requested` (a RequestedSettings)
    argument."""

    @functools.wraps(func)
    def with_request(
        *args: Any,
        ctx: int | None,
        batch: int | None,
        ubatch: int | None,
        kv: str | None,
        flash_attn: bool | None,
        threads: int | None,
        no_mmap: bool,
        no_repack: bool,
        no_profile: bool,
        device: str | None,
        gpu_layers: str | None,
        **kwargs: Any,
    ) -> Any:
        from edgepilot.cli.app import fail
        from edgepilot.plan.requested import RequestedSettings  # at run time: --help stays light

        try:
            requested = RequestedSettings.from_flags(
                ctx,
                batch,
                ubatch,
                kv,
                flash_attn,
                no_mmap,
                threads,
                no_repack,
                no_profile,
                device,
                gpu_layers,
            )
        except UserError as exc:
            raise fail(str(exc)) from None
        return func(*args, requested=requested, **kwargs)

    command: Any = with_request
    for flag in reversed(
        (CTX, BATCH, UBATCH, KV, FLASH_ATTN, THREADS, NO_MMAP, NO_REPACK, NO_PROFILE, DEVICE, GPU_LAYERS)
    ):
        command = flag(command)
    return command


def speculation_flags(func: F) -> F:
    """--lookup, --draft MODEL|none and --draft-max N, handed to the command as one `speculation` argument
    (an engine.speculation.Speculation, None when off). A draft whose tokenizer differs is refused here."""

    @functools.wraps(func)
    def with_speculation(
        *args: Any, lookup: bool, draft: str | None, draft_max: int | None, **kwargs: Any
    ) -> Any:
        from edgepilot.cli.app import fail

        try:
            speculation = speculation_of(kwargs.get("model"), lookup, draft, draft_max)
        except UserError as exc:
            raise fail(str(exc)) from None
        return func(*args, speculation=speculation, **kwargs)

    options = [
        click.option(
            "--lookup", is_flag=True, help="Speculate by n-gram lookup in the text so far (llama-server)"
        ),
        click.option(
            "--draft",
            help="Speculate with a draft model: the same tokenizer, best the same model at fewer bits "
            "(llama-server); auto: what tune --speculation measured faster here",
            metavar="MODEL|auto|none",
        ),
        click.option("--draft-max", type=int, help="Tokens drafted per verify step", metavar="N"),
    ]
    for option in reversed(options):
        with_speculation = option(with_speculation)
    return with_speculation  # type: ignore[return-value]


def speculation_of(model: str | None, lookup: bool, draft: str | None, draft_max: int | None) -> Any:
    """The Speculation these flags ask for (None: none). The draft is resolved as a model name or path and
    checked against the target's tokenizer."""
    from pathlib import Path

    from edgepilot.engine.speculation import Speculation, check_draft_max, check_pair
    from edgepilot.gguf.resolve import resolve_model

    if draft is not None and draft.lower() == "none":
        draft = None
    if lookup and draft is not None:
        raise UserError("give --lookup or --draft, not both")
    if draft is not None and draft.lower() == "auto":
        from edgepilot.tuned.speculation_auto import AutoSpeculation

        check_draft_max(draft_max)
        return AutoSpeculation(draft_max)
    if not lookup and draft is None:
        if draft_max is not None:
            raise UserError("--draft-max goes with --lookup or --draft")
        return None
    if lookup:
        return Speculation("lookup", n_max=draft_max).validate()
    draft_path = resolve_model(draft)
    check_pair(Path(resolve_model(model)), Path(draft_path))
    return Speculation("draft", Path(draft_path), draft_max).validate()


def speculation_candidates(model: str | None, draft: str | None) -> dict:
    """tune --speculation's candidates: lookup, and a draft model (its tokenizer checked): the one named,
    else the same model at fewer bits next to it or in the model store (engine/draft_pick.py)."""
    candidates = {"lookup": speculation_of(model, True, None, None)}
    if draft is None:
        from edgepilot.engine.draft_pick import default_draft

        draft = default_draft(model)
    if draft is not None and draft.lower() != "none":
        candidates["draft"] = speculation_of(model, False, draft, None)
    return candidates
