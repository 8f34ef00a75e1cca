"""What the permission tests of the store, quantize, snapshot and build share: folders of root's that the
ordinary user may not write (or not enter), llama.cpp's built programs copied where that user can run them
(the build cache lives under root's private home), and the check of a refusal."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from nativekit import native_tool


def read_only_folder(path: Path, *files: tuple[str, bytes]) -> Path:
    """A folder of root's (of the test's user when not root) with `files` in it, that others may read
    and enter but not write."""
    path.mkdir(parents=True)
    for name, data in files:
        (path / name).write_bytes(data)
        (path / name).chmod(0o644)
    path.chmod(0o555)
    return path


def seal(path: Path) -> Path:
    """`path` (a folder or file, filled first; a new folder when absent) made one the ordinary user may not
    list, enter or read."""
    if not path.exists():
        path.mkdir(parents=True)
    path.chmod(0)
    return path


def refuses_to_change(user, path: Path) -> None:
    """Fail the test unless `user` really may not open the file `path` for writing."""
    done = user.python("import sys; open(sys.argv[1], 'r+b')", str(path))
    assert "PermissionError" in done.stderr, f"the test user can write {path}: this test would prove nothing"


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every entry under `folder` (as root sees it): file contents, None for folders."""
    found: dict[str, bytes | None] = {}
    for base, dirs, files in os.walk(folder):
        for name in dirs:
            found[os.path.relpath(os.path.join(base, name), folder)] = None
        for name in files:
            path = os.path.join(base, name)
            found[os.path.relpath(path, folder)] = Path(path).read_bytes()
    return found


@functools.cache
def tools_for_user() -> Path:
    """An EDGEPILOT_TOOLS_DIR the ordinary user can read: a copy of the built programs and their libraries
    (both engines use them: llama-quantize, and the libllama the in-process binding loads). When the
    programs come from PATH instead (an installed llama.cpp), the user runs those."""
    from edgepilot.engine.native_tools import tools_dir

    built = native_tool("llama-quantize").parent
    root = Path(tempfile.mkdtemp(prefix="edgepilot-user-tools-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    root.chmod(0o755)
    if built == tools_dir("native") / "bin":
        shutil.copytree(built, root / "native" / "bin", symlinks=True)
        for folder in (root / "native", root / "native" / "bin"):
            folder.chmod(0o755)
    return root


def one_refusal(done: subprocess.CompletedProcess[str], *names: Path | str) -> str:
    """The one `edgepilot: error:` line of a command refused with exit code 2; it names each of `names`."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("edgepilot: error: "), done.stderr
    for name in names:
        assert str(name) in lines[0], lines[0]
    return lines[0]
