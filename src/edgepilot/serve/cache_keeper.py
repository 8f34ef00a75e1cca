"""The in-process worker's main-lane cache kept on disk, so a restarted worker does not process an ongoing
conversation's whole history again (issue 41, part 3).

After each request the cache's state goes to a file in serve's private folder (data folder's `serve-cache/`),
written by llama.cpp itself (llama_state_seq_save_file: no copy of the cache in this process's memory, which
the plan does not count), in the engine's thread once the reply is out. A small header beside it names the
model, the context settings, the number of tokens and the state's sha256; it is renamed into place last, so a
kill at any instant leaves the previous pair or none. A restarted worker loads it back only when all of
that matches: a damaged or foreign file never reaches llama.cpp. A marker written before the load and removed
after it makes a worker that died while loading drop the file: a state llama.cpp cannot take is tried once.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from edgepilot.engine.session_state import context_identity, model_identity
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


def _sha256(path: Path, limit: int) -> str | None:
    """The file's sha256; None when it is missing, not a regular file or over `limit` bytes."""
    digest = hashlib.sha256()
    try:
        with open_regular(path) as f:
            if os.fstat(f.fileno()).st_size > limit:
                return None
            while chunk := f.read(CHUNK):
                digest.update(chunk)
    except (OSError, NotRegularFile):
        return None
    return digest.hexdigest()


class MainCache:
    """The main lane's cache in `folder` (the supervisor's, which it holds alone)."""

    def __init__(self, folder: Path, session: Any) -> None:
        self.folder, self.session = folder, session
        self.identity = model_identity(session.engine.model_path)
        self.kept: list[int] = []  # the tokens of the state on disk
        self.failed = False

    def _header(self) -> dict[str, Any]:
        return {"format": FORMAT, "model": self.identity, "context": context_identity(self.session)}

    def _drop(self) -> None:
        for path in [self.folder / HEADER, *self.folder.glob("main-*.state"), *self.folder.glob(".main-*")]:
            path.unlink(missing_ok=True)

    def restore(self) -> str:
        """Load the kept cache into the session; what happened, for the server's log ("" when none)."""
        from edgepilot.engine.llama_binding import llama_cpp

        marker = self.folder / RESTORING
        if marker.exists():
            marker.unlink(missing_ok=True)
            self._drop()
            return "the kept cache was dropped: the last worker died while loading it"
        try:
            data = read_json(self.folder / HEADER, HEADER_BYTES, "serve's kept cache", "not used")
        except OSError as exc:
            return f"the kept cache is not used: {exc.strerror or exc}"
        if not isinstance(data, dict):
            return ""
        n_ctx = self.session.n_ctx
        name, n = data.get("state"), data.get("n_tokens")
        valid = isinstance(name, str) and STATE_NAME.match(name) and is_int(n, 1, n_ctx)
        if not valid or any(data.get(k) != v for k, v in self._header().items()):
            return "the kept cache is not used: saved by another model or with other settings"
        path = self.folder / name
        if _sha256(path, STATE_BUDGET) != data.get("sha256"):
            return "the kept cache is not used: its state does not match its header"
        try:
            write_text(marker, "", what="marker")
        except UserError as exc:
            return f"the kept cache is not used: {exc}"
        tokens = (llama_cpp.llama_token * n_ctx)()
        count = ctypes.c_size_t(0)
        read = llama_cpp.llama_state_seq_load_file(
            self.session.engine._ctx, str(path).encode(), 0, tokens, n_ctx, ctypes.byref(count)
        )
        marker.unlink(missing_ok=True)
        if not read or count.value != n:
            self.session.reset()
            return "the kept cache is not used: llama.cpp refused its state"
        self.session.cached = list(tokens[:n])
        self.kept = list(self.session.cached)
        return f"the main lane's cache came back from disk: {n} tokens"

    def keep(self) -> str:
        """Write the session's cache when it changed (in the engine's thread, between requests); what went
        wrong, said once ("" otherwise)."""
        from edgepilot.engine.llama_binding import llama_cpp

        tokens = list(self.session.cached)
        if not tokens or tokens == self.kept or self.failed:
            return ""
        ctx = self.session.engine._ctx
        if llama_cpp.llama_state_seq_get_size(ctx, 0) > STATE_BUDGET:
            return ""
        fd, tmp = fresh_temp(self.folder, ".main-", ".state")
        os.close(fd)
        try:
            array = (llama_cpp.llama_token * len(tokens))(*tokens)
            if not llama_cpp.llama_state_seq_save_file(ctx, str(tmp).encode(), 0, array, len(tokens)):
                raise OSError("llama.cpp did not write the state")
            sha = _sha256(tmp, STATE_BUDGET)
            if sha is None:
                raise OSError("the state is larger than the budget")
            state = f"main-{sha[:16]}.state"
            os.replace(tmp, self.folder / state)
            header = {**self._header(), "state": state, "n_tokens": len(tokens), "sha256": sha}
            write_text(self.folder / HEADER, json.dumps(header), what="serve's kept cache")
        except (OSError, ValueError, UserError) as exc:
            tmp.unlink(missing_ok=True)
            self.failed = True
            return f"the cache is not kept on disk: {exc}"
        for old in self.folder.glob("main-*.state"):
            if old.name != state:
                old.unlink(missing_ok=True)
        self.kept = tokens
        return ""
