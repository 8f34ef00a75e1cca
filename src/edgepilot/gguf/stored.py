"""Models in edgepilot's model store (filled by `edgepilot pull`), found by the names the store gives them.

The store is $EDGEPILOT_MODELS_DIR, else `models/` under edgepilot's data dir; a pulled file lives at
`<store>/<owner>__<repo>/<file>`. A MODEL argument that is not an existing path may name one as
`owner/repo:file`, as `owner__repo/file`, or by its bare file name when exactly one stored file has it.
"""

from __future__ import annotations

import os
from pathlib import Path

from edgepilot.datadir import data_dir


def store_path(store: str | os.PathLike[str] | None = None) -> Path:
    chosen = store or os.environ.get("EDGEPILOT_MODELS_DIR")
    return Path(chosen).expanduser() if chosen else data_dir() / "models"


def _inside(store: Path, relative: str) -> Path | None:
    parts = relative.split("/")
    if (
        not relative
        or "\\" in relative
        or relative.startswith("/")
        or any(p in ("", ".", "..") for p in parts)
    ):
        return None
    candidate = store.joinpath(*parts)
    try:
        if not candidate.resolve().is_relative_to(store.resolve()):
            return None
    except OSError:
        return None
    return candidate if os.path.isfile(candidate) and candidate.parent != store else None


def find_in_store(name: str, store: str | os.PathLike[str] | None = None) -> Path | None:
    """The stored file `name` refers to, or None."""
    folder = store_path(store)
    if not os.path.isdir(folder) or len(name) > 1024:  # os.path: a store this user cannot enter is no match
        return None
    head, sep, file = name.partition(":")
    if sep and head.count("/") == 1:
        owner, repo = head.split("/")
        if "__" in owner or not owner or not repo:
            return None
        return _inside(folder, f"{owner}__{repo}/{file}")
    found = _inside(folder, name)
    if found is not None or "/" in name or not name.endswith(".gguf"):
        return found
    matches = [p for p in folder.glob(f"*/{name}") if os.path.isfile(p) and not os.path.islink(p)]
    return matches[0] if len(matches) == 1 else None
