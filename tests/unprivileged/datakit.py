"""What the tests of data and output permissions share: folders and files that refuse the ordinary user
(tests/userkit.py) for real, and copies of a model and of llama.cpp that it can read (root's ~/.cache and a
venv under /root are closed to it).

Folders are made by the test process: as root they are root's and the user gets their `other` bits; as an
ordinary user they are the user's own, so the modes refuse the owner too (0o555: no writing, 0o000: no
entering), which works both ways.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

NO_WRITE = 0o555
NO_ENTRY = 0o000


_refused: list[Path] = []


def refusing(path: Path, mode: int) -> Path:
    """`path` (a folder, made when missing) set to `mode` until the test ends (reopen_refused)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)
    _refused.append(path)
    return path


def shut_file(path: Path, text: str) -> Path:
    """A file the user may neither read nor write (its content stays for the test to compare)."""
    path.write_text(text)
    path.chmod(0)
    _refused.append(path)
    return path


@pytest.fixture(autouse=True)
def reopen_refused(open_tmp):
    """Give the test process its folders back before open_tmp removes them (needed as an ordinary owner)."""
    yield
    while _refused:
        path = _refused.pop()
        with contextlib.suppress(OSError):
            path.chmod(0o755 if path.is_dir() else 0o644)


def refuses_writing(user, path: Path) -> None:
    """Fail the test unless `user` really cannot open the file `path` for writing (no vacuous test)."""
    probe = "import sys\ntry:\n open(sys.argv[1], 'r+b').close()\nexcept PermissionError:\n sys.exit(13)"
    done = user.python(probe, str(path))
    assert done.returncode == 13, f"the test user can write {path}: this test would prove nothing"


def read_as_owner(path: Path) -> str:
    """The content of a file the test shut (root reads it anyway; an ordinary owner opens it first)."""
    path.chmod(0o600)
    return path.read_text()


def _open_folder(prefix: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    atexit.register(shutil.rmtree, folder, True)
    return folder


@functools.cache
def readable_model(source: Path) -> Path:
    """A copy of a small model in an open folder (the venv holding it may be closed to the user)."""
    copy = _open_folder("edgepilot-user-model-") / source.name
    shutil.copyfile(source, copy)
    copy.chmod(0o644)
    return copy


@functools.cache
def readable_tools() -> dict[str, str]:
    """The environment pointing the user at a readable copy of the built llama.cpp (its libllama is what
    the in-process engine loads); fails the test when none is built."""
    from edgepilot.engine.native_tools import tools_dir

    built = tools_dir() / "bin"
    if not (built / "llama-server").is_file():
        pytest.fail(f"llama.cpp's programs are not built ({built}): run `edgepilot build` first")
    root = _open_folder("edgepilot-user-tools-")
    shutil.copytree(built, root / "native" / "bin", symlinks=True)
    subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
    return {"EDGEPILOT_TOOLS_DIR": str(root)}


def one_error_line(stderr: str) -> str:
    """The single `edgepilot: error:` line a refused file must give: no traceback, nothing else."""
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("edgepilot: error: "), stderr[-3000:]
    return lines[0]


def notes(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr[-3000:]
    return [line for line in stderr.splitlines() if line.startswith("edgepilot: note: ")]


def as_user_env(**values: os.PathLike[str] | str) -> dict[str, str]:
    return {key: os.fspath(value) for key, value in values.items()}


SHORT_BENCH = ("-p", "0", "-n", "4", "-r", "1", "-t", "1")


def in_data(folder: Path, **extra: str) -> dict[str, str]:
    """The environment that makes `folder` edgepilot's data folder (plus `extra`)."""
    return {"EDGEPILOT_DATA_DIR": str(folder), **extra}


def own_data(user) -> Path:
    """The user's own data folder (what the test puts in it stays root's when the tests run as root)."""
    folder = user.home / "data"
    folder.mkdir()
    user.give(folder)
    return folder
