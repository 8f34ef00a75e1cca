"""llama-server's main slot kept on disk (serve/kept_state.py), so a restarted worker does not process an
ongoing conversation's whole history again (issue 41, part 3).

llama-server runs with `--slot-save-path` on serve's folder. After each request of the main lane the front
asks it to save the slot (`POST /slots/ID?action=save`: llama.cpp writes the file, llama-server waits for the
slot to be free); before the first request to a new worker, to restore it (`?action=restore`), once the
header and the state's sha256 match. Both are blocking calls: the front runs them off its event loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgepilot.engine.session_state import model_identity, settings_identity
from edgepilot.engine.unix_http import UnixClient, WorkerUnavailable
from edgepilot.errors import UserError
from edgepilot.serve.kept_state import KeptState, NotKept

TIMEOUT_S = 300.0  # a save waits for the slot's request to end


class SlotCache:
    def __init__(self, folder: Path, socket_path: str, model: Path, settings: Any, slot: int) -> None:
        self.folder, self.settings, self.slot = folder, settings, slot
        self.client = UnixClient(socket_path, timeout=TIMEOUT_S)
        self.model = model_identity(model)

    def _state(self, n_ctx: int) -> KeptState:
        return KeptState(self.folder, self.model, settings_identity(self.settings, n_ctx))

    def _post(self, action: str, filename: str) -> dict[str, Any]:
        try:
            status, data = self.client.request(
                "POST", f"/slots/{self.slot}?action={action}", {"filename": filename}
            )
            out = json.loads(data)
        except (WorkerUnavailable, ValueError) as exc:
            raise OSError(f"llama-server did not {action} the slot: {exc}") from None
        if status != 200 or not isinstance(out, dict):
            raise OSError(f"llama-server did not {action} the slot (HTTP {status})")
        return out

    def save(self, n_ctx: int) -> str:
        """Keep the slot's cache; what went wrong ("" otherwise)."""
        state = self._state(n_ctx)
        tmp = None
        try:
            tmp = state.temp()
            n = self._post("save", tmp.name).get("n_saved")
            if not isinstance(n, int) or n <= 0:
                raise OSError("llama-server saved no tokens")
            state.commit(tmp, n)
        except (OSError, UserError) as exc:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            return f"the cache is not kept on disk: {exc}"
        return ""

    def restore(self, n_ctx: int) -> str:
        """Give a new worker the kept cache; what happened, for the server's log ("" when none)."""
        state = self._state(n_ctx)
        try:
            found = state.to_load(n_ctx)
        except NotKept as exc:
            return str(exc)
        if found is None:
            return ""
        path, n = found
        try:
            restored = self._post("restore", path.name).get("n_restored")
        except OSError as exc:  # the marker stays: a worker that died loading it does not meet it again
            return f"the kept cache is not used: {exc}"
        state.loaded()
        if restored != n:
            return "the kept cache is not used: llama-server refused its state"
        return f"the main lane's cache came back from disk: {n} tokens"


class KeptSlot:
    """The front's use of SlotCache: a restore before the first main-lane request to each new worker, a
    save after each main-lane request that was answered (one at a time: requests answered while a save runs
    get one more save after it, of the slot as it is then)."""

    def __init__(self, cache: SlotCache, log: Callable[[str], None]) -> None:
        self.cache, self.log = cache, log
        self.restored_for: int | None = None  # the worker's pid
        self.saving: asyncio.Future[None] | None = None
        self.again = False
        self.said = ""

    async def before(self, worker: Any) -> None:
        if worker is None or worker.pid == self.restored_for:
            return
        self.restored_for = worker.pid
        said = await asyncio.to_thread(self.cache.restore, worker.n_ctx)
        if said:
            self.log(said)

    def after(self, worker: Any) -> None:
        if worker is None:
            return
        if self.saving is not None and not self.saving.done():
            self.again = True
            return
        self.saving = asyncio.ensure_future(self._save(worker))

    async def _save(self, worker: Any) -> None:
        self.again = True
        while self.again:
            self.again = False
            said = await asyncio.to_thread(self.cache.save, worker.n_ctx)
            if said and said != self.said:
                self.log(said)
            self.said = said
