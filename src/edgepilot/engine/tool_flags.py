"""Command lines for the llama.cpp that is installed, whichever version it is.

A packaged llama.cpp (Termux, Debian, Homebrew) is months newer or older than the pinned one: some flags came
later (`--cache-ram`, `--fit`, `--no-repack`), some were renamed. The program's own `--help` says which it
knows; a flag it does not know is dropped (or replaced by its older spelling) rather than failing the load.
"""

from __future__ import annotations

import re
from pathlib import Path

from edgepilot.engine.native_tools import tool_output

FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
# Flags edgepilot adds that a llama.cpp may lack, with how many values follow each.
OPTIONAL = {
    "--cache-ram": 1,
    "--fit": 1,
    "-lv": 1,
    "--no-webui": 0,
    "-lm": 1,
    "--no-repack": 0,
    "--swa-full": 0,
    "--cpu-strict": 1,
    "--cpu-strict-batch": 1,
    "-C": 1,
    "-Cb": 1,
    "--progress": 0,
    "--no-warmup": 0,
    "--slot-save-path": 1,
    "-dev": 1,  # llama.cpp before late 2024 has no device selection (and no GPU backend loading behind it)
}
# An older spelling to use when the newer one is missing: (new flag, its value) -> replacement argv
OLDER = {("-lm", "none"): ["--no-mmap"]}


def help_text(tool: Path | str) -> str | None:
    """What `TOOL --help` prints (stdout and stderr), cached per binary (None: it would not run)."""
    return tool_output(tool, "--help")


def known_flags(tool: Path | str) -> frozenset[str] | None:
    """The flags the program's --help lists (None: it would not say)."""
    text = help_text(tool)
    if text is None:
        return None
    flags = frozenset(FLAG.findall(text))
    return flags if len(flags) > 10 else None  # too few: not a help text, keep the command as it is


def adapt_args(tool: Path | str, argv: list[str]) -> list[str]:
    known = known_flags(tool)
    return argv if known is None else adapt_to(known, argv)


def adapt_to(known: frozenset[str], argv: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        n = OPTIONAL.get(arg)
        if i == 0 or n is None or arg in known:
            out.append(arg)
            i += 1
            continue
        values = argv[i + 1 : i + 1 + n]
        older = OLDER.get((arg, values[0] if values else ""))
        if older and all(f in known for f in older):
            out += older
        i += 1 + n
    return out
