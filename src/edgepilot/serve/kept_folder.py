"""The folder where serve keeps its worker's cache between worker starts (serve/cache_keeper.py): the data
folder's `serve-cache/MODEL/`, private (0700), held by one serve at a time (a lock the supervisor keeps for
as long as it runs: a second serve of the same model keeps no cache rather than another's)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from edgepilot.datadir import data_dir, writable_data_folder
from edgepilot.errors import UserError
from edgepilot.safe_write import name_part

LOCK = "lock"


class KeptFolder:
    """The held folder (`path` None when it cannot be had, `note` says why)."""

    def __init__(self, model: Path) -> None:
        self.path: Path | None = None
        self.note = ""
        self._fd: int | None = None
        folder = data_dir() / "serve-cache" / (name_part(model.name) or "model")
        try:
            writable_data_folder(folder, "it")  # the note names the worker's cache
            os.chmod(folder, 0o700)
            fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except (UserError, OSError) as exc:
            self.note = f"the worker's cache is not kept on disk: {exc}"
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            self.note = "another serve of this model keeps its cache: this one keeps none on disk"
            return
        self.path, self._fd = folder, fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


class _NotKept(KeptFolder):
    def __init__(self) -> None:  # no folder: the cache is not kept (llama-server, --no-cache-reuse)
        self.path, self.note, self._fd = None, "", None


NOT_KEPT = _NotKept()
