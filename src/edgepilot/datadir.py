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
