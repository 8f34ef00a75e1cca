"""The draft `tune --speculation` measures when none is named: the same model at fewer bits, found next to
the target (where `edgepilot quantize` writes) and in the model store.

The same model means the same architecture, layer count and width and the same tokenizer (gguf/tokenizer_id:
tokens, merges, tokenizer model); fewer bits means a smaller file. Such a draft agrees with its target far
more often than a smaller model of the family, and greedy verification keeps the target's own text.

    same_model_drafts(target, store) -> [Path]  the smallest first
    default_draft(model) -> str | None           the smallest, in the model store edgepilot uses

Every candidate is a file someone else may have put there: its header is read with the parser's bounds, a
file that cannot be read or parsed is passed over, and at most MAX_CANDIDATES files are looked at.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from edgepilot.gguf.gguf_records import GGUFHeader

MAX_CANDIDATES = 64  # .gguf files looked at, the nearest folders first
SMALLER = 0.9  # a draft is at most this share of the target's size: "fewer bits", not a copy


def _shape(header: GGUFHeader) -> tuple | None:
    """(architecture, layers, width) from a header that parsed whole, else None."""
    arch = header.architecture
    if not header.complete or header.problems or arch is None:
        return None
    md = header.metadata
    return arch, md.get(f"{arch}.block_count"), md.get(f"{arch}.embedding_length")


def _gguf_files(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as entries:
            return sorted(
                Path(e.path) for e in entries if e.name.endswith(".gguf") and e.is_file(follow_symlinks=False)
            )
    except OSError:
        return []


def _folders(target: Path, store: Path | None) -> list[Path]:
    folders = [target.parent]
    if store is not None:
        try:
            with os.scandir(store) as entries:
                folders += sorted(Path(e.path) for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            pass
    return list(dict.fromkeys(folders))


def same_model_drafts(
    target: str | os.PathLike[str], store: str | os.PathLike[str] | None = None
) -> list[Path]:
    """Files that are `target` at fewer bits, the smallest first (none: an empty list)."""
    from edgepilot.errors import UserError
    from edgepilot.gguf.gguf_header import read_header
    from edgepilot.gguf.tokenizer_id import differences, tokenizer_digests

    target = Path(target).resolve()
    size = target.stat().st_size
    target_header = read_header(target)
    shape = _shape(target_header)
    if shape is None:
        return []
    digests = None
    found: list[tuple[int, Path]] = []
    looked = 0
    for folder in _folders(target, None if store is None else Path(store)):
        for path in _gguf_files(folder):
            if looked >= MAX_CANDIDATES:
                break
            if path.resolve() == target:
                continue
            looked += 1
            try:
                candidate_size = path.stat().st_size
                if candidate_size > SMALLER * size:
                    continue
                header = read_header(path)
                if _shape(header) != shape:
                    continue
                digests = digests or tokenizer_digests(target, target_header)
                if not differences(digests, tokenizer_digests(path, header)):
                    found.append((candidate_size, path))
            except (OSError, UserError):
                continue  # unreadable or not a GGUF: not a draft
    return [path for _size, path in sorted(found)]


def default_draft(model: str | None) -> str | None:
    """The draft `tune --speculation` measures when none is named: the smallest same-model file, or None."""
    from edgepilot.gguf.resolve import resolve_model
    from edgepilot.gguf.stored import store_path

    found = same_model_drafts(resolve_model(model), store_path())
    return str(found[0]) if found else None
