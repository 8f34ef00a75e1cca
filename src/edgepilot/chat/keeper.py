"""A chat kept on disk as it goes (issue 41): a kill at any instant leaves the last complete turn readable.

After every completed turn the session (messages, and in-process the KV cache's state within a disk budget)
is copied in the chat's thread (a memory copy) and written by a background thread through a temporary file
renamed over the session file (safe_write.atomic_write), so the next turn does not wait for the disk and
a half-written file is never the session. Before a turn, its question goes to a small `.pending` file beside
it (atomic too): a kill during the answer leaves the question, which `chat --resume` shows as unanswered.

Sessions live in the data folder's `sessions/`, one file per chat, named after the model and when the chat
began: `chat --resume` takes the newest of the model's.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from glob import escape as glob_escape
from pathlib import Path

from edgepilot.datadir import data_dir, writable_data_folder
from edgepilot.errors import UserError
from edgepilot.file_errors import writable_folder
from edgepilot.kept import read_json
from edgepilot.safe_write import atomic_write, name_part

SUFFIX = ".session"
PENDING = ".pending"
MAX_LISTED = 1000  # session files looked at when finding the newest (a folder a stranger filled stays cheap)
PENDING_BYTES = 1 << 20
DISK_BUDGET = 256 << 20  # a session's KV state larger than this is not kept (the messages are)
NO_SAVE = "or chat with --no-save"


def sessions_dir() -> Path:
    return data_dir() / "sessions"


def model_prefix(model: Path) -> str:
    """The file-name prefix of a model's sessions: its file name, made safe as a file name."""
    return name_part(model.name) + "--"


def new_session_path(model: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime())
    return sessions_dir() / f"{model_prefix(model)}{stamp}-{time.time_ns() % 1_000_000:06d}{SUFFIX}"


@dataclass
class KeptSession:
    path: str
    model_file: str  # the model's file name, as the session's name keeps it
    size: int
    modified: float  # seconds since the epoch


def list_sessions(model: Path | None = None) -> list[KeptSession]:
    """The kept sessions (of one model, or all), newest first; at most MAX_LISTED entries are looked at."""
    folder = sessions_dir()
    if not folder.is_dir():
        return []
    prefix = model_prefix(model) if model is not None else ""
    found: list[KeptSession] = []
    try:
        for i, entry in enumerate(folder.iterdir()):
            if i >= MAX_LISTED:
                break
            name = entry.name
            if name.startswith(prefix) and name.endswith(SUFFIX) and "--" in name and entry.is_file():
                st = entry.stat()
                found.append(KeptSession(str(entry), name.rsplit("--", 1)[0], st.st_size, st.st_mtime))
    except OSError as exc:
        raise UserError(f"cannot list the sessions in {folder}: {exc.strerror or exc}") from None
    return sorted(found, key=lambda s: s.modified, reverse=True)


@dataclass
class SessionList:
    folder: str
    sessions: list[KeptSession]


@dataclass
class Forgotten:
    folder: str
    forgotten: int


def kept_chats(model: Path | None = None) -> SessionList:
    """`chat --sessions`: the kept chats, newest first."""
    return SessionList(str(sessions_dir()), list_sessions(model))


def forget_chats(model: Path | None = None) -> Forgotten:
    """`chat --forget-sessions`: remove them."""
    return Forgotten(str(sessions_dir()), forget_sessions(model))


def latest_session(model: Path) -> Path | None:
    """The newest session file of this model (by modification time), or None."""
    found = list_sessions(model)
    return Path(found[0].path) if found else None


def forget_sessions(model: Path | None = None) -> int:
    """Remove the kept sessions (of one model, or all) with their pending questions; returns how many."""
    gone = 0
    for s in list_sessions(model):
        path = Path(s.path)
        try:
            path.unlink()
            path.with_name(path.name + PENDING).unlink(missing_ok=True)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UserError(f"cannot remove {path}: {exc.strerror or exc}") from None
        gone += 1
    return gone


def pending_question(session_file: Path, n_messages: int) -> str | None:
    """The question a killed chat was answering when it died: one recorded after exactly the messages the
    session file holds (an older `.pending`, left by a kill after the save, is not this chat's)."""
    path = session_file.with_name(session_file.name + PENDING)
    if not path.exists():
        return None
    data = read_json(path, PENDING_BYTES, "pending question", "it is left out")
    if not isinstance(data, dict) or type(data.get("after")) is not int:
        return None
    if not isinstance(data.get("question"), str) or len(data["question"]) > PENDING_BYTES:
        return None
    return data["question"] if data["after"] == n_messages else None


class SessionKeeper:
    """Keeps one chat's session file up to date; `session_bytes()` is called in the chat's thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if path.parent == sessions_dir():
            writable_data_folder(path.parent, "the chat's session", also="chat with --no-save")
        else:  # a session resumed from elsewhere: the data folder's fix would not help
            writable_folder(
                path.parent, "the chat's session", "give a folder you can write, or chat with --no-save"
            )
        self._sweep()
        self._writer: threading.Thread | None = None
        self.error: str | None = None  # the last write's failure, said once by the chat
        self.saved_turns = 0

    def _sweep(self) -> None:
        """Temporary files of this session a kill left mid-write (safe_write names them .NAME.*.tmp): the
        session they were becoming is older than the file in place, so they are garbage."""
        for name in (self.path.name, self.path.name + PENDING):
            for stale in list(self.path.parent.glob(f".{glob_escape(name)}.*.tmp"))[:MAX_LISTED]:
                stale.unlink(missing_ok=True)

    @property
    def pending_path(self) -> Path:
        return self.path.with_name(self.path.name + PENDING)

    def before_turn(self, question: str, n_messages: int) -> None:
        self.wait()
        body = json.dumps({"after": n_messages, "question": question}, ensure_ascii=False).encode()
        with atomic_write(self.pending_path, what="pending question", fix=NO_SAVE) as f:
            f.write(body)

    def after_turn(self, data: bytes) -> None:
        """Write the session's bytes in the background (the previous write finished first: in order)."""
        self.wait()
        self._writer = threading.Thread(target=self._write, args=(data,), name="ep-session", daemon=True)
        self._writer.start()

    def _write(self, data: bytes) -> None:
        try:
            with atomic_write(self.path, what="session file", fix=NO_SAVE) as f:
                f.write(data)
            self.pending_path.unlink(missing_ok=True)
            self.saved_turns += 1
        except (UserError, OSError) as exc:
            self.error = str(exc)

    def wait(self) -> None:
        if self._writer is not None:
            self._writer.join()
            self._writer = None
