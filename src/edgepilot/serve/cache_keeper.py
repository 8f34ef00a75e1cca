"""The in-process worker's main-lane cache kept on disk (serve/kept_state.py), so a restarted worker does not
process an ongoing conversation's whole history again (issue 41, part 3).

After each request the cache's state is written by llama.cpp itself (llama_state_seq_save_file: no copy of
the cache in this process's memory, which the plan does not count), in the engine's thread once the reply is
out; a restarted worker loads it back before it takes requests.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

from edgepilot.engine.session_state import context_identity, model_identity
from edgepilot.errors import UserError
from edgepilot.serve.kept_state import STATE_BUDGET, KeptState, NotKept


class MainCache:
    """The main lane's cache in `folder` (the supervisor's, which it holds alone)."""

    def __init__(self, folder: Path, session: Any) -> None:
        self.session = session
        identity = model_identity(session.engine.model_path)
        self.state = KeptState(folder, identity, context_identity(session))
        self.kept: list[int] = []  # the tokens of the state on disk
        self.failed = False

    def restore(self) -> str:
        """Load the kept cache into the session; what happened, for the server's log ("" when none)."""
        from edgepilot.engine.llama_binding import llama_cpp

        n_ctx = self.session.n_ctx
        try:
            found = self.state.to_load(n_ctx)
        except NotKept as exc:
            return str(exc)
        if found is None:
            return ""
        path, n = found
        tokens = (llama_cpp.llama_token * n_ctx)()
        count = ctypes.c_size_t(0)
        ctx = self.session.engine._ctx
        read = llama_cpp.llama_state_seq_load_file(
            ctx, str(path).encode(), 0, tokens, n_ctx, ctypes.byref(count)
        )
        self.state.loaded()
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
        tmp = None
        try:
            tmp = self.state.temp()
            array = (llama_cpp.llama_token * len(tokens))(*tokens)
            if not llama_cpp.llama_state_seq_save_file(ctx, str(tmp).encode(), 0, array, len(tokens)):
                raise OSError("llama.cpp did not write the state")
            self.state.commit(tmp, len(tokens))
        except (OSError, UserError) as exc:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            self.failed = True
            return f"the cache is not kept on disk: {exc}"
        self.kept = tokens
        return ""
