"""`edgepilot inspect`: thin CLI over edgepilot.gguf.inspect.inspect_model."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from edgepilot.cli import flags
from edgepilot.cli.app import app, emit, user_errors
from edgepilot.cli.format import human_bytes, human_count

if TYPE_CHECKING:
    from rich.console import Console

    from edgepilot.gguf.gguf_info import ModelInfo


def render(info: ModelInfo, out: Console) -> None:
    from rich.text import Text

    from edgepilot.cli.narrow import Column, print_pairs, print_records, say
    from edgepilot.shown import shown
    from edgepilot.words import count

    facts: list[tuple[str, str]] = []

    def fact(label: str, value: str) -> None:  # the file's own strings: print_pairs shows them as data
        facts.append((label, value))

    fact("file", f"{info.path} ({human_bytes(info.file_bytes)})")
    fact("name", info.name or "-")
    fact("architecture", info.architecture)
    fact("parameters", f"{human_count(info.n_params)} ({info.n_params:,})")
    fact("quantization", f"{info.file_type or '?'} · {info.bits_per_weight:.2f} bits per weight")
    fact("trained context", str(info.context_length or "?"))
    kv_heads = info.head_count_kv if info.head_count_kv is not None else "?"
    heads = [
        count(info.block_count or "?", "layer"),
        count(info.head_count or "?", "head"),
        count(kv_heads, "KV head"),
    ]
    fact("layers / heads", " · ".join(heads))
    if info.sliding_window:
        fact("sliding window", count(info.sliding_window, "token"))
    fact("vocabulary", str(info.vocab_size or "?"))
    fact("chat template", "yes" if info.has_chat_template else "no")
    print_pairs(out, facts, gap=2, label_style="bold")
    columns = [
        Column("type"),
        Column("tensors", numeric=True),
        Column("params", numeric=True),
        Column("size", numeric=True),
        Column("share", numeric=True),
    ]
    rows = [
        [q.ggml_type, str(q.tensors), human_count(q.params), human_bytes(q.bytes), f"{q.share_of_bytes:.1%}"]
        for q in info.quant_mix
    ]
    print_records(out, columns, rows, title="quantization mix")
    validation = info.validation
    if validation is not None:
        if getattr(validation, "ok", False):
            out.print("[green]valid[/]: header, tensor layout and file size agree")
        else:
            for problem in getattr(validation, "problems", []):
                say(out, Text.assemble(("problem", "red"), f" {problem.code}: {shown(problem.message)}"))
    for note in info.notes:
        say(out, f"note: {note}")


@app.command()
@flags.MODEL
@click.option("--sha256", help="Expected sha256 (hex) of the file", metavar="HEX")
@flags.JSON
@user_errors
def inspect(model: str, sha256: str | None, as_json: bool) -> None:
    """Architecture, sizes, quantization mix and validation verdict of a GGUF model.

    Exit code 1 when the file is damaged (the problems are listed), 2 for bad input.
    """
    from edgepilot.gguf.inspect import inspect_model

    info = inspect_model(model, sha256=sha256)
    emit(info, as_json, render)
    if info.validation is not None and not info.validation.ok:
        raise click.exceptions.Exit(1)
