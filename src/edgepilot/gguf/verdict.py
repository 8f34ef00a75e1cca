"""The one verdict on a model file that every tool acts on.

`inspect` reports it, `fit` plans with what it lets through, and `run`, `serve`, `bench` and `tune` load only
what it lets through. It reads the header and a little of the tail, never the tensor data, so it answers as
fast for a 6 GiB file as for a small one; only `inspect` hashes the whole file, and only when a sha256 is
expected (`--sha256` or a sidecar file).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal

from edgepilot.errors import UserError
from edgepilot.gguf.arch import arch_params
from edgepilot.gguf.gguf_header import read_header
from edgepilot.gguf.gguf_records import GGUFHeader, Problem, open_checked, sharing
from edgepilot.gguf.gguf_validate import Validation, validate_gguf
from edgepilot.gguf.model_path import open_model

Purpose = Literal["inspect", "plan", "load"]
PURPOSES: tuple[str, ...] = ("inspect", "plan", "load")
# Damage a plan may go on with: the memory plan depends on the header alone, never on the weights' values.
PLAN_TOLERATES = frozenset({"zero-tail"})
MAX_LINE = 300  # characters of a problem quoted in a refusal
# What this process read of a model, by file identity (device, inode, size, mtime) and what was checked (an
# expected sha256, a sidecar): a command's layers (resolve, plan, engine, doctor) share one read of the model,
# and a changed file is read again.
_READ: dict[tuple, tuple[GGUFHeader, Validation]] = {}
MAX_REMEMBERED = 8


@dataclass
class ModelVerdict:
    path: Path
    purpose: str
    header: GGUFHeader
    validation: Validation
    refusal: Problem | None = None  # the first problem that stops this purpose (never for inspect)
    notes: list[str] = field(default_factory=list)  # the problems this purpose goes on with, to show

    def require(self) -> ModelVerdict:
        """This verdict, or a UserError (one line, exit 2) naming the problem that refuses the file."""
        if self.refusal is not None:
            raise UserError(refusal_line(self.path, self.refusal))
        return self


def one_line(text: str, limit: int = MAX_LINE) -> str:
    """Problem messages can quote bytes from a damaged header: no control characters, bounded length."""
    flat = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def refusal_line(path: Path, problem: Problem) -> str:
    return (
        f"{one_line(str(path), 200)} is damaged: {one_line(problem.message)} "
        f"(details: edgepilot inspect {shlex.quote(str(path))})"
    )


def loader_problems(header: GGUFHeader) -> list[Problem]:
    """What llama.cpp's loader needs from the metadata (an architecture and its required keys)."""
    if not header.complete:
        return []
    try:
        arch_params(header.metadata)
    except UserError as exc:
        return [Problem("bad-metadata", f"{exc}: the header is damaged or was written by a broken tool")]
    except (ValueError, TypeError, ArithmeticError, IndexError) as exc:  # hostile values: a verdict too
        return [Problem("bad-metadata", f"the hyper-parameters cannot be read ({type(exc).__name__}: {exc})")]
    return []


def validate_model(
    path: str | os.PathLike[str],
    *,
    sha256: str | None = None,
    sidecar: bool = True,
    header: GGUFHeader | None = None,
) -> Validation:
    """validate_gguf's file checks plus the metadata llama.cpp needs to load the model at all (read once per
    command: a file this process already validated, unchanged since, is not read again)."""
    if header is not None:
        validation = validate_gguf(path, sha256=sha256, sidecar=sidecar, header=header)
        validation.problems += loader_problems(header)
        validation.ok = not any(p.severity == "error" for p in validation.problems)
        return validation
    known = _known(path, sha256, sidecar)
    if known is not None:
        return known[1]
    with open_checked(path) as f, sharing(path, f):  # one open for the header and the tail
        header = read_header(path)
        validation = validate_model(path, sha256=sha256, sidecar=sidecar, header=header)
        _remember(_identity(f, sha256, sidecar), header, validation)
    return validation


def _remember(key: tuple, header: GGUFHeader, validation: Validation) -> None:
    _READ[key] = header, validation
    while len(_READ) > MAX_REMEMBERED:
        del _READ[next(iter(_READ))]


def model_verdict(
    model: str | os.PathLike[str], purpose: Purpose = "load", sha256: str | None = None
) -> ModelVerdict:
    """Check `model` for `purpose`:

    - "inspect": every problem is reported, none refuses (the CLI exits 1 when the file is not ok);
    - "plan": any damage refuses except a zero-filled tail, which becomes a note (the plan holds);
    - "load": any damage refuses.

    Raises UserError for a path that is missing, unreadable or not a GGUF file at all.
    """
    if purpose not in PURPOSES:
        raise ValueError(f"unknown purpose {purpose!r}")
    sidecar = purpose == "inspect"
    known = _known(model, sha256, sidecar)
    if known is not None:  # read already in this command, unchanged since: not even opened again
        return _judge(Path(model).expanduser(), purpose, *known)
    path, f = open_model(model)
    with f:
        key = _identity(f, sha256, sidecar)
        if key not in _READ:  # the same unchanged file asked again in this command: no second read
            with sharing(path, f):  # the header and the tail are read through this one open
                header = read_header(path)
                _remember(key, header, validate_model(path, sha256=sha256, sidecar=sidecar, header=header))
    header, validation = _READ[key]
    return _judge(path, purpose, header, validation)


def header_of(model: str | os.PathLike[str]) -> GGUFHeader:
    """A model's header for a reader that needs no verdict (a chat template, an architecture): the one the
    command's verdict already read when there is one, else read now."""
    try:
        st = os.stat(model)
    except OSError:
        return read_header(model)
    for (dev, ino, size, mtime, *_), (header, _validation) in reversed(_READ.items()):
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == (dev, ino, size, mtime):
            return header
    return read_header(model)


def _known(model: str | os.PathLike[str], sha256: str | None, sidecar: bool) -> tuple | None:
    try:
        st = os.stat(Path(model).expanduser())
    except (OSError, ValueError):
        return None
    return _READ.get((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, sha256, sidecar))


def _identity(f: BinaryIO, sha256: str | None, sidecar: bool) -> tuple:
    st = os.fstat(f.fileno())
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, sha256, sidecar)


def _judge(path: Path, purpose: Purpose, header: GGUFHeader, validation: Validation) -> ModelVerdict:
    tolerated = PLAN_TOLERATES if purpose == "plan" else frozenset()
    refusing = [p for p in validation.problems if p.severity == "error" and p.code not in tolerated]
    if not header.complete and not refusing:  # read_header always says why; this is only a safety net
        refusing = [Problem("truncated-header", "the header could not be read completely")]
    verdict = ModelVerdict(path, purpose, header, validation)
    if purpose == "inspect":
        return verdict
    verdict.refusal = refusing[0] if refusing else None
    for p in validation.problems:
        if p in refusing:
            continue
        note = f"model file ({p.code}): {one_line(p.message)}"
        if p.code in tolerated:
            note += "; the plan needs only the header, but `edgepilot run` refuses this file"
        verdict.notes.append(note)
    return verdict
