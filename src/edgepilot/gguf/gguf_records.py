"""What a GGUF header holds once parsed: its records and the problems found in it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from edgepilot.untrusted import failure, open_regular

DEFAULT_ALIGNMENT = 32  # GGUF_DEFAULT_ALIGNMENT
MAX_PROBLEMS = 40


@dataclass
class Problem:
    code: str
    message: str
    severity: str = "error"  # "error": llama.cpp refuses or the file is damaged; "warning": worth saying


@dataclass
class SkippedValue:
    """A metadata value too large to keep (tokenizer vocabularies, merges, long templates)."""

    type: str  # "string" or "array[<item type>]"
    count: int  # characters of a string, items of an array
    # where the value lies in the file, [start, end): enough to compare two files' values (tokenizers)
    span: tuple[int, int] | None = field(default=None, metadata={"json": False})


@dataclass
class TensorInfo:
    name: str
    shape: list[int]  # ggml order: shape[0] is the row length
    ggml_type: int
    type_name: str | None  # None if the installed `gguf` package does not know the type id
    offset: int  # relative to the start of the data section
    n_elements: int
    n_bytes: int | None  # None when the type is unknown or the shape is invalid


@dataclass
class GGUFHeader:
    path: str
    file_size: int
    version: int | None = None
    tensor_count: int | None = None
    kv_count: int | None = None
    alignment: int = DEFAULT_ALIGNMENT
    metadata: dict[str, Any] = field(default_factory=dict)
    metadata_types: dict[str, str] = field(default_factory=dict)
    tensors: list[TensorInfo] = field(default_factory=list)
    header_end: int | None = None  # first byte after the tensor infos
    data_offset: int | None = None  # where llama.cpp starts the data section
    complete: bool = False  # every KV pair and tensor info was parsed
    problems: list[Problem] = field(default_factory=list)

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None

    def add(self, code: str, message: str, severity: str = "error") -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(Problem(code, message, severity))
        elif len(self.problems) == MAX_PROBLEMS:
            self.problems.append(
                Problem("too-many-problems", "more problems were found; only the first are listed")
            )


# Files a verdict has open (gguf/verdict.py, `sharing`): the header parser and the tail check read through the
# one open of the file instead of opening it again.
_SHARED: dict[str, BinaryIO] = {}


@contextlib.contextmanager
def sharing(path: str | os.PathLike[str], f: BinaryIO) -> Iterator[None]:
    """While the block runs, open_checked(path) reads through `f` (a new file object on a dup of its fd)."""
    key = str(path)
    _SHARED[key] = f
    try:
        yield
    finally:
        _SHARED.pop(key, None)


def open_checked(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a model file for reading; UserError for a path that is missing, a directory or not readable."""
    shared = _SHARED.get(str(path))
    if shared is not None:
        f = os.fdopen(os.dup(shared.fileno()), "rb")
        f.seek(0)
        return f
    p = Path(path)
    try:
        return open_regular(p)
    except OSError as exc:
        raise failure(exc, "model file", p) from None
