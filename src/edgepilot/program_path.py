"""Where a program is on PATH: shutil.which's POSIX lookup, without importing shutil.

`import shutil` loads bz2, lzma and zlib for its archive functions: about 10 ms of a command's start-up here
(more on a phone) spent before `probe` or `fit` looks for a single program.
"""

from __future__ import annotations

import os


def _runnable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.X_OK) and not os.path.isdir(path)


def which(name: str) -> str | None:
    """The path of the program `name` as shutil.which finds it on POSIX: a name with a slash as it is, else
    the first runnable file of that name in $PATH's folders (os.defpath when PATH is unset, none when it is
    empty)."""
    if os.path.dirname(name):
        return name if _runnable(name) else None
    seen: set[str] = set()
    path = os.environ.get("PATH", os.defpath)
    if not path:
        return None
    for folder in path.split(os.pathsep):
        if folder in seen:
            continue
        seen.add(folder)
        candidate = os.path.join(folder, name)
        if _runnable(candidate):
            return candidate
    return None
