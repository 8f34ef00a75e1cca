"""The MODEL argument as a path to a GGUF file: it exists (or names a model in the store), is a regular file,
and starts with the GGUF magic."""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from edgepilot.errors import UserError
from edgepilot.untrusted import failure, open_regular


def check_model_path(arg: str | os.PathLike[str]) -> Path:
    """A path that exists, is a file, is readable and starts with the GGUF magic; else a UserError."""
    path, f = open_model(arg)
    f.close()
    return path


def open_model(arg: str | os.PathLike[str]) -> tuple[Path, BinaryIO]:
    """check_model_path's checks, and the file left open (at offset 0) for the caller to read and close."""
    path = Path(arg).expanduser()
    # a name from the model store (`edgepilot pull`): owner/repo:file, a file name. os.path.exists: a path
    # in a folder this user may not enter is refused by the open below, with its name, not a traceback
    if not os.path.exists(path):
        from edgepilot.gguf.stored import find_in_store

        path = find_in_store(str(arg)) or path
    try:
        f = open_regular(path)  # a FIFO or a device would block or never end
    except FileNotFoundError as exc:
        hint = _where_to_get(str(arg))
        if hint is None:
            raise failure(exc, "model file", path) from None
        raise UserError(f"model file not found: {path}; {hint}") from None
    except OSError as exc:
        raise failure(exc, "model file", path) from None
    try:
        magic = f.read(4)
        f.seek(0)
    except OSError as exc:
        f.close()
        raise failure(exc, "model file", path) from None
    if magic != b"GGUF":
        f.close()
        if len(magic) < 4:
            raise UserError(
                f"{path} is not a GGUF model: the file is {len(magic)} bytes long (empty or truncated)"
            )
        raise UserError(
            f"{path} is not a GGUF model (it starts with {magic!r}, not b'GGUF'); "
            "llama.cpp only loads .gguf files — convert it with llama.cpp's convert_hf_to_gguf.py"
        )
    return path, f


def _where_to_get(arg: str) -> str | None:
    """The next step for a model name that is neither a file nor in the store: the exact `edgepilot pull`
    for owner/repo:file, the store's listing for a bare file name (None for a path: a typo to fix there)."""
    from edgepilot.shown import shell_word

    head, sep, file = arg.partition(":")
    owner, slash, repo = head.partition("/")
    if sep and slash and owner and repo and "/" not in repo and file:
        return f"download it with `edgepilot pull {shell_word(head)} {shell_word(file)}`"
    if "/" not in arg and os.sep not in arg:
        return "`edgepilot models` lists the models you have; `edgepilot pull OWNER/REPO` downloads one"
    return None
