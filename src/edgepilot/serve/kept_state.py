"""A worker's cache kept in serve's folder between worker starts (issue 41, part 3), for both engines: the
state file llama.cpp writes (llama_state_seq_save_file's format, in-process or through llama-server's
`/slots` save), and beside it a small header naming the model, the context settings, the number of tokens
and the state's sha256.

The state is written under a temporary name, hashed, renamed to a name of its own, and the header renamed
into place last: a kill at any instant leaves the previous pair, or none. A state is handed back to llama.cpp
only when all of the header matches: a damaged or foreign file never reaches it. A marker written before a
load and removed after it makes the next start drop a state whose load killed the worker (tried once).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from edgepilot.errors import UserError
from edgepilot.kept import is_int, read_json
from edgepilot.safe_write import fresh_temp, write_text
from edgepilot.untrusted import NotRegularFile, open_regular

HEADER = "main.json"
RESTORING = "restoring"
STATE_NAME = re.compile(r"^main-[0-9a-f]{16}\.state$")
STATE_BUDGET = 256 << 20  # a larger cache is not kept (a 1B model's full 4096-token f16 cache is 128 MiB)
HEADER_BYTES = 64 << 10
FORMAT = "edgepilot-serve-cache/1"
CHUNK = 1 << 20
DIED_LOADING = "the kept cache was dropped: the last worker died while loading it"


class NotKept(Exception):
    """Why the kept cache is not loaded (said in the server's log)."""


def _sha256(path: Path) -> str | None:
    """The file's sha256; None when it is missing, not a regular file or over STATE_BUDGET."""
    digest = hashlib.sha256()
    try:
        with open_regular(path) as f:
            if os.fstat(f.fileno()).st_size > STATE_BUDGET:
                return None
            while chunk := f.read(CHUNK):
                digest.update(chunk)
    except (OSError, NotRegularFile):
        return None
    return digest.hexdigest()


class KeptState:
    """The main lane's kept cache in `folder`, for a model (its identity) at some context settings."""

    def __init__(self, folder: Path, model: dict[str, Any], context: dict[str, Any]) -> None:
        self.folder = folder
        self.identity = {"format": FORMAT, "model": model, "context": context}

    def drop(self) -> None:
        for path in [self.folder / HEADER, *self.folder.glob("main-*.state"), *self.folder.glob(".main-*")]:
            path.unlink(missing_ok=True)

    def to_load(self, n_ctx: int) -> tuple[Path, int] | None:
        """(the state file, its token count) when the header matches, the marker written; None when there is
        nothing kept; NotKept with the reason otherwise. Call loaded() once llama.cpp has read it."""
        marker = self.folder / RESTORING
        if marker.exists():
            marker.unlink(missing_ok=True)
            self.drop()
            raise NotKept(DIED_LOADING)
        try:
            data = read_json(self.folder / HEADER, HEADER_BYTES, "serve's kept cache", "not used")
        except OSError as exc:
            raise NotKept(f"the kept cache is not used: {exc.strerror or exc}") from None
        if not isinstance(data, dict):
            return None
        name, n = data.get("state"), data.get("n_tokens")
        valid = isinstance(name, str) and STATE_NAME.match(name) and is_int(n, 1, n_ctx)
        if not valid or any(data.get(k) != v for k, v in self.identity.items()):
            raise NotKept("the kept cache is not used: saved by another model or with other settings")
        path = self.folder / str(name)
        if _sha256(path) != data.get("sha256"):
            raise NotKept("the kept cache is not used: its state does not match its header")
        try:
            write_text(marker, "", what="marker")
        except UserError as exc:
            raise NotKept(f"the kept cache is not used: {exc}") from None
        return path, int(n)  # type: ignore[arg-type]

    def loaded(self) -> None:
        (self.folder / RESTORING).unlink(missing_ok=True)

    def temp(self) -> Path:
        """A fresh file name for llama.cpp to write the state to (commit() it, or unlink it)."""
        fd, tmp = fresh_temp(self.folder, ".main-", ".state")
        os.close(fd)
        return tmp

    def commit(self, tmp: Path, n_tokens: int) -> None:
        """The written state made the kept one (OSError or UserError when it cannot be)."""
        sha = _sha256(tmp)
        if sha is None:
            raise OSError("the state is larger than the budget or was not written")
        state = f"main-{sha[:16]}.state"
        os.replace(tmp, self.folder / state)
        header = {**self.identity, "state": state, "n_tokens": n_tokens, "sha256": sha}
        write_text(self.folder / HEADER, json.dumps(header), what="serve's kept cache")
        for old in self.folder.glob("main-*.state"):
            if old.name != state:
                old.unlink(missing_ok=True)
