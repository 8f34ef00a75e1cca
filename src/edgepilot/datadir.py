"""Where edgepilot keeps what outlives a command (bench history, tuned profiles).

$EDGEPILOT_DATA_DIR, else $XDG_DATA_HOME/edgepilot, else ~/.local/share/edgepilot.
"""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    explicit = os.environ.get("EDGEPILOT_DATA_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "edgepilot"


DATA_ELSEWHERE = "set EDGEPILOT_DATA_DIR to a folder you own"
# What to do when the data folder refuses us: one a `sudo edgepilot ...` made belongs to root.
DATA_FIX = f"make it yours (chown) or {DATA_ELSEWHERE}"


def writable_data_folder(folder: Path, what: str, also: str = "") -> Path:
    """`folder` (the data dir or a folder in it) ready to be written, or one line naming the folder that
    refuses and what to do (`also`: another way out, e.g. a --no-save)."""
    from edgepilot.file_errors import writable_folder

    more = f", or {also}" if also else ""
    return writable_folder(folder, what, DATA_FIX + more, DATA_ELSEWHERE + more)
