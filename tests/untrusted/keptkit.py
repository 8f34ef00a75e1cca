"""Something else where a kept file should be, as a stranger or a damaged disk leaves it."""

from __future__ import annotations

import os
from pathlib import Path


def in_place(path: Path, kind: str, head: bytes = b"") -> Path:
    """At `path`: a FIFO ("fifo"), a directory ("directory"), a sparse 4 GiB file that starts with `head`
    ("huge"), JSON nested 100,000 deep ("deep"), or `head` alone (any other kind)."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "huge":
        with path.open("wb") as f:
            f.write(head)
            f.truncate(4 << 30)  # sparse
    elif kind == "deep":
        path.write_text("[" * 100000 + "]" * 100000)
    else:
        path.write_bytes(head)
    return path
