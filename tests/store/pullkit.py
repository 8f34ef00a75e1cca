"""What the store's tests share: `edgepilot pull` through click's runner, its one-line errors, file hashes,
and the store the session's environment points at."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from click.testing import CliRunner


def pull(cli_app, *args: str):
    return CliRunner().invoke(cli_app, ["pull", *args])


def one_error_line(res) -> str:
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgepilot: error: "), res.stderr
    assert "Traceback" not in res.output
    return lines[0]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def store() -> Path:
    return Path(os.environ["EDGEPILOT_MODELS_DIR"])
