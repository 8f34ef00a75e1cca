"""llama-server's slot as a file: its KV cache saved and restored through `/slots/0?action=save|restore`.

The engine starts llama-server with `--slot-save-path` on its private folder, so the file llama.cpp writes
(llama_state_seq_save_file's format: the tokens and the state) is only ever read back here, bounded, and a
restore hands llama.cpp only bytes a session file carried (checked field by field first, session_state.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from edgepilot.engine.base import EngineError

SLOT_FILE = "slot.bin"
FLAG = "--slot-save-path"


def slot_flags(folder: str) -> list[str]:
    return [FLAG, folder.rstrip("/") + "/"]  # llama-server joins folder and file name as strings


def save_slot(engine: Any, max_bytes: int) -> bytes:
    """The slot's cache as bytes; b"" when it is larger than max_bytes or this llama-server cannot save."""
    path = Path(engine._dir) / SLOT_FILE
    try:
        engine._json("POST", "/slots/0?action=save", {"filename": SLOT_FILE})
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size > max_bytes:
                return b""
            return f.read(max_bytes + 1)[:max_bytes]
    except (EngineError, OSError):
        return b""
    finally:
        path.unlink(missing_ok=True)


def restore_slot(engine: Any, data: bytes) -> int:
    """Give llama-server a saved slot; returns the tokens it restored (EngineError when it refuses)."""
    path = Path(engine._dir) / SLOT_FILE
    try:
        path.write_bytes(data)
        out = engine._json("POST", "/slots/0?action=restore", {"filename": SLOT_FILE})
    except OSError as exc:
        raise EngineError(f"cannot hand the saved cache to llama-server: {exc.strerror or exc}") from None
    finally:
        path.unlink(missing_ok=True)
    return int(out.get("n_restored") or 0)


def slot_token_count(data: bytes) -> int | None:
    """How many tokens a slot file says it holds (magic, version, count, the tokens, the state), or None when
    it is not one. (Newer llama-servers pack their list with markers, -1 among them: the session keeps its
    own tokens, and llama-server answers a restore with the count it unpacked.)"""
    if len(data) < 12 or data[:4] != b"qsgg":
        return None
    n = int.from_bytes(data[8:12], "little")
    return n if 0 < n <= (len(data) - 12) // 4 else None
