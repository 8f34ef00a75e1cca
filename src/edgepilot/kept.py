"""Files edgepilot keeps for itself (calibrations, profiles, the bandwidth figure, build stamps), read as the
input they are: another process, a full disk, a sync tool or a stranger may have written them.

A kept file is read through untrusted.py (a regular file only, never a FIFO or a device; at most the size
its writer keeps it under; JSON nested at most JSON_MAX_DEPTH deep), and every value in it is checked for
type and range before it is used: a bool is no count, NaN, infinity and strings are no figure. What does not
pass is left out, and said once per file (`Dropped.note`), naming the file; a file that cannot be read at all
is a note too, except when it is only missing.

A kept file whose values move a plan (the memory calibrations) is also sealed (`sealed`, `unsealed`): a digest
of its content written with it. A value can be damaged inside its valid range (a flipped digit, a truncated
sample, an edit by hand or by a sync tool); such a file no longer matches its seal and is not used at all.
The seal is no secret: whoever can write the data folder on purpose can write a seal too (and could replace
edgepilot itself), so every value is still checked for type and range.

Every kept figure is read and written through one helper: `KeptFile` (a JSON object: read bounded, what
cannot be used is absent, a refusal said once; written atomically and private, its folder checked first) and
`KeyedCache` on top of it (figures by key, the newest kept within the reader's cap): the memory bandwidth,
the GPU and CPU checks, the memory calibrations.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgepilot.datadir import DATA_FIX, data_dir, writable_data_folder
from edgepilot.digest import sha256_hex
from edgepilot.errors import UserError
from edgepilot.file_errors import escaped, is_denied, note_once, refused_where
from edgepilot.untrusted import JSON_MAX_DEPTH, FileTooLarge, NotRegularFile, loads_json, read_capped

# Bytes no term of a memory plan on a phone or a board can reach (a 1 TiB process): beyond it a value is
# damage, not a measurement.
MAX_BYTES = 1 << 40
MAX_COUNT = 1 << 24  # layers, ubatch tokens, weight types, vocabulary entries


SEAL_KEY = "seal"


def _digest(content: dict[str, Any]) -> str:
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return "sha256:" + sha256_hex(text)


def sealed(content: dict[str, Any]) -> dict[str, Any]:
    """content with its seal, as its writer keeps it."""
    return {**{k: v for k, v in content.items() if k != SEAL_KEY}, SEAL_KEY: _digest(content)}


def unsealed(data: Any) -> dict[str, Any] | None:
    """The content of a sealed file's JSON; None when it has no seal or does not match it."""
    if not isinstance(data, dict) or not isinstance(data.get(SEAL_KEY), str):
        return None
    content = {k: v for k, v in data.items() if k != SEAL_KEY}
    return content if data[SEAL_KEY] == _digest(content) else None


def is_int(value: Any, low: int, high: int) -> bool:
    """An integer (not a bool) in [low, high]."""
    return type(value) is int and low <= value <= high


def is_number(value: Any, low: float, high: float) -> bool:
    """A finite int or float (not a bool) in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and low <= value <= high


def shown_value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class Dropped:
    """What was left out of one kept file, said in one note."""

    def __init__(self, path: str | os.PathLike[str], what: str, then: str) -> None:
        self.path, self.what, self.then = Path(path), what, then
        self.items: list[str] = []

    def drop(self, where: str, value: Any) -> None:
        self.items.append(f"{where} = {shown_value(value)}")

    def note(self) -> None:
        if not self.items:
            return
        more = f" (and {len(self.items) - 1} more)" if len(self.items) > 1 else ""
        note_once(
            f"left out of {self.what} {escaped(self.path)} (not of its type or range): "
            f"{self.items[0]}{more}; {self.then}"
        )


def read_json(
    path: str | os.PathLike[str], limit: int, what: str, then: str, depth: int = JSON_MAX_DEPTH
) -> Any:
    """A kept file's JSON, or None when it is missing or cannot be used (noted once, naming the file, unless
    it is only missing). Permission errors are raised (PermissionError): each store says them its way."""
    try:
        return loads_json(read_capped(path, limit), max_depth=depth)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (NotRegularFile, FileTooLarge) as exc:
        why = exc.strerror
    except IsADirectoryError:
        why = "is a directory"
    except OSError as exc:
        if is_denied(exc):  # each store says a refusal its own way
            raise
        why = f"cannot be read ({exc.strerror or exc})"
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        why = f"is damaged ({str(exc)[:80]})"
    note_once(f"{what} {escaped(path)} {why}: {then}")
    return None


@dataclass(frozen=True, kw_only=True)
class KeptFile:
    """A JSON object edgepilot keeps in its data folder, read as input (read_json) and written atomically,
    private to this user (safe_write), within the size its reader accepts."""

    what: str  # named in every note: "the GPU check cache"
    limit: int  # the reader's cap in bytes; the writer stays within it
    then: str  # what is done without it: "checked again"
    refused: str  # what a refusal to read it costs: "checked again and the result not kept"
    depth: int = JSON_MAX_DEPTH

    def read(self, path: Path, quiet: bool = False) -> dict[str, Any] | None:
        """The file's JSON object ({} when it is missing or cannot be used: said once, naming the file,
        unless it is only missing); None when permissions keep it from us (noted once unless quiet): then
        it is neither used nor written over."""
        try:
            data = read_json(path, self.limit, self.what, self.then, self.depth)
        except OSError as exc:
            if not quiet:
                note_once(
                    f"cannot read {self.what} {escaped(path)} ({refused_where(path, exc)}): {self.refused}; "
                    f"{DATA_FIX}"
                )
            return None
        if data is not None and not isinstance(data, dict):
            note_once(f"{self.what} {escaped(path)} is not edgepilot's: {self.then}")
        return data if isinstance(data, dict) else {}

    def write(self, path: Path, text: str) -> str | None:
        """Keep `text` at `path` (its folder made when missing). The reason when it could not be kept."""
        from edgepilot.safe_write import write_text

        try:
            writable_data_folder(path.parent, self.what)
            write_text(path, text, what=self.what.removeprefix("the "))
        except UserError as exc:
            return str(exc)
        return None


Entries = dict[str, dict[str, Any]]


@dataclass(frozen=True, kw_only=True)
class KeyedCache(KeptFile):
    """A kept file of figures by key, `{"format": FORMAT, SECTION: {key: entry}}` in the data folder, its
    entries in the order they were kept (the oldest first, the first to go beyond `most` or `limit`)."""

    name: str  # the file's name in the data folder
    section: str  # where the entries are: "checks", "devices"
    most: int  # entries kept
    form: int = 1  # the format this reader and writer share

    def path(self) -> Path:
        return data_dir() / self.name

    def entries(self, quiet: bool = False) -> Entries | None:
        """The kept entries by key, each a dict ({} when none or the file cannot be used: said once naming
        the file); None when permissions keep the file from us (KeptFile.read)."""
        data = self.read(self.path(), quiet)
        if not data:
            return data
        form, entries = data.get("format"), data.get(self.section)
        if type(form) is not int or form != self.form or not isinstance(entries, dict):
            note_once(
                f"{self.what} {escaped(self.path())} is not edgepilot's (format {self.form}): {self.then}"
            )
            return {}
        return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, dict)}

    def text(self, entries: Entries) -> str:
        """The file as written (ValueError for a value JSON cannot hold: NaN, infinity)."""
        return json.dumps({"format": self.form, self.section: entries}, indent=1, allow_nan=False) + "\n"

    def fitting(self, entries: Entries) -> Entries:
        """The newest `most` entries, fewer while the file would be over `limit` (the newest always kept)."""
        kept = dict(list(entries.items())[-self.most :])
        while len(kept) > 1 and len(self.text(kept).encode()) > self.limit:
            kept.pop(next(iter(kept)))
        return kept

    def store(
        self, key: str, entry: dict[str, Any], fit: Callable[[Entries], Entries] | None = None
    ) -> str | None:
        """Keep `entry` under `key` as the newest (`fit`: which entries the file keeps, else `fitting`). The
        reason when it could not be kept."""
        entries = self.entries()
        if entries is None:
            return f"cannot read {escaped(self.path())}, so it is not written over"
        # an entry JSON cannot hold (a NaN another writer left) would keep every later one from being kept
        entries = {k: v for k, v in entries.items() if k != key and _holds(v)}
        entries[key] = entry
        return self.replace(entries, fit)

    def replace(self, entries: Entries, fit: Callable[[Entries], Entries] | None = None) -> str | None:
        """Keep these entries (`fit`: which of them the file keeps, else `fitting`). The reason when they
        could not be kept."""
        try:
            text = self.text((fit or self.fitting)(entries))
        except ValueError as exc:
            return f"{self.what} could not be written ({exc})"
        return self.write(self.path(), text)


def _holds(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True
