"""A chat's session across processes: resume the newest (or a named) session file, keep each turn.

The KV cache comes back with the messages (in-process llama.cpp's sequence state, on llama-server its slot
file), so the resumed chat's next turn processes only its new tokens; when the settings differ from the saved
ones (or llama-server refuses the slot), the messages come back and the next turn processes the conversation
again, said once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgepilot.chat.keeper import (
    DISK_BUDGET,
    SessionKeeper,
    latest_session,
    new_session_path,
    pending_question,
    sessions_dir,
)
from edgepilot.chat.saved_messages import saved_messages
from edgepilot.engine.session_header import CacheNotLoaded
from edgepilot.errors import UserError

# `chat` below is a chat.session.ChatSession (not imported: it imports this module)
ChatSession = Any


@dataclass
class Resumed:
    path: str
    messages: int
    cached_tokens: int  # the KV cache restored with them (0: processed again at the next turn)
    unanswered: str | None = None  # the question the chat was answering when it stopped
    notes: list[str] = field(default_factory=list)


def resume(chat: ChatSession, spec: str) -> Resumed:
    """Load a session into the chat: `spec` "" = the newest of this model's, else a file."""
    if spec:
        path = Path(spec).expanduser()
    else:
        found = latest_session(chat.path)
        if found is None:
            raise UserError(
                f"no saved chat with {chat.path.name} in {sessions_dir()}: start one without --resume"
            )
        path = found
    notes: list[str] = []
    try:
        chat.load(path)
    except CacheNotLoaded as exc:
        chat.messages = _messages_only(chat, path)
        notes.append(f"{exc}: the messages are back, the next turn processes them again")
    if chat.messages and not chat.kv.cached:
        notes.append("the cache was not kept with this chat: the next turn processes it again")
    question = pending_question(path, len(chat.messages))
    if question is not None:
        notes.append("the last question was not answered (the chat was stopped): it is shown, ask it again")
    return Resumed(str(path), len(chat.messages), len(chat.kv.cached), question, notes)


def _messages_only(chat: ChatSession, path: Path) -> list[tuple[str, str]]:
    from edgepilot.engine.session_state import saved_header

    return saved_messages(saved_header(path, chat.path, chat.max_state_bytes), path, chat.n_ctx)


def keeper_for(chat: ChatSession, resumed: Resumed | None) -> SessionKeeper:
    """A resumed chat goes on in its file; a new one gets a new file."""
    return SessionKeeper(Path(resumed.path) if resumed else new_session_path(chat.path))


def keep_turn(chat: ChatSession, keeper: SessionKeeper, identity: Any) -> None:
    """The session's bytes copied now, written in the background."""
    from edgepilot.engine.session_state import server_session_bytes, session_bytes

    extra = {"messages": [list(m) for m in chat.messages]}
    budget = min(DISK_BUDGET, chat.max_state_bytes)
    if chat.engine.kind == "inprocess":
        data = session_bytes(chat.kv, extra, budget, identity)
    else:
        data = server_session_bytes(chat.kv, extra, budget, identity)
    keeper.after_turn(data)
