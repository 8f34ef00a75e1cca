"""The real CLI as an ordinary user: our users are never root (Termux gives every app its own uid, a Pi user
is `pi`), while CI runs as root, where chmod 555 on a folder refuses nothing. A permission test passes as root
whether or not the code handles the refusal, so these helpers run `python -m edgepilot` as uid nobody
(setpriv) when the tests run as root, as the current user otherwise, and `refuses_write` / `refuses_read`
prove the refusal is real for that user before a test relies on it.

The user must reach an interpreter and our code: the venv's interpreter may sit under a private home
(pyenv in /root), so the user runs a system interpreter of the same version, and when the checkout or its
site-packages are not readable by the user, a world-readable copy of them (the model packages left out).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

NOBODY = 65534
REPO_SRC = Path(__file__).resolve().parents[1] / "src"
# Wheels of models (tens of MiB each) are not code the CLI imports.
MODEL_PACKAGE_HINTS = ("gguf", "smollm", "gemma", "llama_cpp")


def is_root() -> bool:
    return os.geteuid() == 0


def _as_user(argv: list[str]) -> list[str]:
    if not is_root():
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("tests of permissions run as nobody through setpriv (util-linux), which is not installed")
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *argv]


def _runs(python: str, path: list[str]) -> bool:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": os.pathsep.join(path)}
    probe = "import edgepilot.cli, rich, psutil, click"
    try:
        done = subprocess.run(
            _as_user([python, "-c", probe]), env=env, capture_output=True, timeout=60, cwd="/"
        )
    except OSError:
        return False
    return done.returncode == 0


def _interpreters() -> list[str]:
    """This interpreter first, then system ones of the same version (compiled packages must match)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    found = [sys.executable]
    for folder in ("/usr/bin", "/usr/local/bin", "/bin"):
        candidate = Path(folder) / f"python{version}"
        if candidate.exists():
            found.append(str(candidate))
    return found


def _readable_copy() -> list[str]:
    """A world-readable copy of our source and this environment's site-packages (models left out)."""
    root = Path(tempfile.mkdtemp(prefix="edgepilot-user-code-"))
    root.chmod(0o755)
    no_cache = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO_SRC / "edgepilot", root / "src" / "edgepilot", ignore=no_cache)
    site = Path(sysconfig.get_paths()["purelib"])
    target = root / "site"
    target.mkdir()
    for entry in site.iterdir():
        name = entry.name.lower()
        ours = name.startswith(("__editable__", "edgepilot"))
        if ours or any(hint in name for hint in MODEL_PACKAGE_HINTS):
            continue
        if entry.is_dir():
            shutil.copytree(entry, target / entry.name, symlinks=True)
        elif entry.suffix != ".pth":
            shutil.copy2(entry, target / entry.name)
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(folder, name), 0o755)
        for name in files:
            path = os.path.join(folder, name)
            os.chmod(path, os.stat(path).st_mode | 0o444)
    return [str(root / "src"), str(target)]


@functools.cache
def _launch() -> tuple[str, tuple[str, ...]]:
    """An interpreter and PYTHONPATH with which the ordinary user imports edgepilot."""
    path = [str(REPO_SRC), sysconfig.get_paths()["purelib"]]
    for python in _interpreters():
        if _runs(python, path):
            return python, tuple(path)
    copied = _readable_copy()
    for python in _interpreters():
        if _runs(python, copied):
            return python, tuple(copied)
    pytest.fail(
        "no interpreter of this Python version that an unprivileged user can run (the tests of permissions "
        "need one: install python3 from the distribution)"
    )


@dataclass
class OrdinaryUser:
    """An unprivileged user with a home of its own (writable by it) under an open temporary folder."""

    home: Path
    uid: int
    gid: int

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        _, path = _launch()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "PYTHONPATH": os.pathsep.join(path),
            "COLUMNS": "50",
            "EDGEPILOT_DATA_DIR": str(self.home / "data"),
            "XDG_CACHE_HOME": str(self.home / "cache"),
        }
        env.update(extra or {})
        return env

    def run(
        self, *args: str, env: dict[str, str] | None = None, input: str | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """`edgepilot ARGS` as this user, from its home; stdout and stderr as text."""
        python, _ = _launch()
        return subprocess.run(
            _as_user([python, "-m", "edgepilot", *args]),
            env=self.env(env),
            cwd=self.home,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def python(self, code: str, *args: str) -> subprocess.CompletedProcess[str]:
        python, _ = _launch()
        return subprocess.run(
            _as_user([python, "-c", code, *args]),
            env=self.env(),
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def refuses_write(self, folder: Path) -> None:
        """Fail the test unless this user really cannot create a file in `folder` (no vacuous test)."""
        probe = (
            "import os,sys\ntry:\n open(os.path.join(sys.argv[1],'.probe'),'x').close()\n"
            "except PermissionError:\n sys.exit(13)\nsys.exit(0)"
        )
        done = self.python(probe, str(folder))
        if done.returncode == 0:
            os.unlink(folder / ".probe")
        assert done.returncode == 13, f"the test user can write into {folder}: this test would prove nothing"

    def refuses_read(self, path: Path) -> None:
        """Fail the test unless this user really cannot read `path` (a file, or list a folder)."""
        probe = (
            "import os,sys\np=sys.argv[1]\ntry:\n"
            " os.listdir(p) if os.path.isdir(p) else open(p,'rb').close()\n"
            "except PermissionError:\n sys.exit(13)\nsys.exit(0)"
        )
        done = self.python(probe, str(path))
        assert done.returncode == 13, f"the test user can read {path}: this test would prove nothing"

    def give(self, path: Path) -> Path:
        """Hand `path` (and what is under it) to this user, as its own files would be."""
        if is_root():
            for folder, dirs, files in os.walk(path):
                for name in [*dirs, *files]:
                    os.lchown(os.path.join(folder, name), self.uid, self.gid)
            os.lchown(path, self.uid, self.gid)
        return path


def make_user(base: Path) -> OrdinaryUser:
    """The user, with `base` (an open folder, see conftest's open_tmp) holding its home."""
    home = base / "home"
    home.mkdir()
    uid, gid = (NOBODY, NOBODY) if is_root() else (os.getuid(), os.getgid())
    user = OrdinaryUser(home, uid, gid)
    user.give(home)
    return user
