"""Save a session's KV cache to one file and load it back (llama.cpp's sequence state API).

The file: a magic line, a JSON header (the model's identity, the context settings, the cached tokens and
what the caller adds, e.g. the chat's messages) and the bytes of llama_state_seq_get_data. Loading is reading
untrusted input: the file is read FIFO-safe and bounded (untrusted.read_user_file), the header parsed with a
depth limit and checked field by field (session_header.py), and the state handed to llama.cpp only when it was
saved by the same model with the same context settings and its length is the one the header declares; anything
else is refused with one line, before the session is touched.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgepilot.engine.session_header import CacheNotLoaded, SessionFileError, check_header
from edgepilot.safe_write import atomic_write, check_target
from edgepilot.untrusted import loads_json, open_regular, read_user_file

if TYPE_CHECKING:
    from edgepilot.engine.session import KVSession

# llama.cpp's binding is imported where the in-process cache is read or written: llama-server's chat (Termux's
# engine, without llama-cpp-python) keeps its sessions through this module too

MAGIC = b"EDGEPILOT-SESSION 1\n"
FORMAT = "edgepilot-session/1"
MAX_HEADER_BYTES = 8 << 20  # the tokens of a 128k context as JSON, and the messages, fit well below this
IDENTITY_BYTES = 4 << 20  # the GGUF header (metadata, tokenizer) lies in the first MiBs of the file

__all__ = ["SessionFileError", "load_session", "save_session"]


def model_identity(path: Path) -> dict[str, Any]:
    """The model's size and the sha256 of its first 4 MiB (metadata, tokenizer, first tensors): hashing a
    multi-GB file whole would cost a phone tens of seconds per save and load."""
    with open_regular(path) as f:
        head = f.read(IDENTITY_BYTES)
        size = os.fstat(f.fileno()).st_size
    return {"size": size, "head_sha256": hashlib.sha256(head).hexdigest()}


def context_identity(session: Any) -> dict[str, Any]:
    return settings_identity(session.engine.settings, session.n_ctx)


def settings_identity(s: Any, n_ctx: int) -> dict[str, Any]:
    """The settings a saved cache can be loaded back under (EngineSettings, the context's size)."""
    return {
        "n_ctx": n_ctx,
        "type_k": s.type_k,
        "type_v": s.type_v,
        "flash_attn": bool(s.flash_attn),
        "swa_full": bool(s.swa_full),
        "n_gpu_layers": s.n_gpu_layers,
    }


def save_session(session: Any, path: str | Path, extra: dict[str, Any], fix: str = "") -> int:
    """Write the session (and `extra`, JSON-able) to path atomically; returns the file's size. `fix`: what
    to do when the path may not be written."""
    inputs = [session.engine.model_path]
    check_target(path, inputs=inputs, what="session file", fix=fix)  # before the copy
    if session.engine.kind == "tools":
        data = server_session_bytes(session, extra, 1 << 40, None)
    else:
        data = session_bytes(session, extra)
    # never over the model being chatted with, a device node or a directory; a fresh temporary file
    with atomic_write(path, inputs=inputs, what="session file", fix=fix) as f:
        f.write(data)
    return len(data)


def session_bytes(
    session: KVSession, extra: dict[str, Any], max_state_bytes: int | None = None, identity: Any = None
) -> bytes:
    """The session file's bytes: the cache's state copied now (the context is free again when this
    returns), left out when it is larger than max_state_bytes (the messages alone are kept then).
    `identity`: model_identity of the model, when the caller keeps it (it reads the model's first 4 MiB)."""
    from edgepilot.engine.llama_binding import llama_cpp

    ctx = session.engine._ctx
    size = llama_cpp.llama_state_seq_get_size(ctx, 0) if session.cached else 0
    if max_state_bytes is not None and size > max_state_bytes:
        size = 0
    buf = (ctypes.c_uint8 * max(1, size))()
    n = llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0) if size else 0
    return _file_bytes(session, identity, list(session.cached) if n else [], bytes(buf)[:n], extra)


def messages_only_bytes(session: Any, extra: dict[str, Any], identity: Any = None) -> bytes:
    """A session file without the cache (llama-server's engine, whose cache lives in its own process)."""
    return _file_bytes(session, identity, [], b"", extra)


def server_session_bytes(session: Any, extra: dict[str, Any], max_state_bytes: int, identity: Any) -> bytes:
    """llama-server's session file: its slot's cache (llama.cpp's own slot file, carried as the state) and
    the tokens the session knows it holds; the messages alone when it cannot save."""
    from edgepilot.engine.server_slots import save_slot, slot_token_count

    state = save_slot(session.engine, max_state_bytes) if session.cached else b""
    tokens = list(session.cached)
    if not state or slot_token_count(state) is None or not tokens:
        return messages_only_bytes(session, extra, identity)
    return _file_bytes(session, identity, tokens, state, extra)


def _file_bytes(session: Any, identity: Any, tokens: list[int], state: bytes, extra: dict[str, Any]) -> bytes:
    """The file: magic, the header (the model's identity, the context's, the cached tokens, the state's
    length and the caller's `extra`), then the state."""
    header = {
        "format": FORMAT,
        "model": identity or model_identity(session.engine.model_path),
        "context": context_identity(session),
        "tokens": tokens,
        "state_bytes": len(state),
        **extra,
    }
    head = json.dumps(header, ensure_ascii=False).encode("utf-8")
    return MAGIC + f"{len(head)}\n".encode() + head + state


def saved_header(path: str | Path, model_path: Path, max_state_bytes: int) -> dict[str, Any]:
    """A session file's header, the model checked (SessionFileError otherwise): for taking its messages
    alone, when its cache cannot be loaded here."""
    data = read_user_file(path, "session file", len(MAGIC) + 16 + MAX_HEADER_BYTES + max_state_bytes)
    header, _ = _header(data, path)
    if header.get("model") != model_identity(model_path):
        raise SessionFileError(f"{path} was saved with another model file; load it with that model")
    return header


def _header(data: bytes, path: str | Path) -> tuple[dict[str, Any], bytes]:
    bad = SessionFileError(f"{path} is not an edgepilot session file")
    if not data.startswith(MAGIC):
        raise bad
    rest = data[len(MAGIC) :]
    line, nl, rest = rest.partition(b"\n")
    if not nl or not line.isdigit() or len(line) > 9 or int(line) > min(MAX_HEADER_BYTES, len(rest)):
        raise bad
    n = int(line)
    try:
        header = loads_json(rest[:n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise bad from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise bad
    return header, rest[n:]


def load_session(
    session: Any,
    path: str | Path,
    max_state_bytes: int,
    check_extra: Callable[[dict[str, Any]], object] | None = None,
) -> dict[str, Any]:
    """Load a saved session into `session` (its cache replaced); returns the header (the caller's extra
    keys included). SessionFileError (one line) when the file is not one this session can take: every field
    of the header is checked first (the caller's own with `check_extra`, which raises SessionFileError), so
    a refused file leaves the session as it was."""
    data = read_user_file(path, "session file", len(MAGIC) + 16 + MAX_HEADER_BYTES + max_state_bytes)
    header, state = _header(data, path)
    check_header(
        header,
        path,
        identity=model_identity(session.engine.model_path),
        n_ctx=session.n_ctx,
        n_vocab=session.engine.load.n_vocab,
        max_state_bytes=max_state_bytes,
    )
    want = context_identity(session)
    if header["context"] != want:
        raise CacheNotLoaded(f"{path} was saved with other settings: {_differs(header['context'], want)}")
    tokens = header["tokens"]
    if header["state_bytes"] != len(state) or bool(tokens) != bool(state):
        raise SessionFileError(f"{path} is damaged (its tokens or state do not match its header)")
    if check_extra is not None:
        check_extra(header)
    session.reset()
    if state and session.engine.kind == "tools":
        _restore_slot(session, state, tokens, path)
    elif state:
        from edgepilot.engine.llama_binding import llama_cpp

        buf = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        read = llama_cpp.llama_state_seq_set_data(session.engine._ctx, buf, len(state), 0)
        mem = llama_cpp.llama_get_memory(session.engine._ctx)
        if read != len(state) or llama_cpp.llama_memory_seq_pos_max(mem, 0) != len(tokens) - 1:
            session.reset()
            raise SessionFileError(f"llama.cpp refused the state in {path} (damaged or another build)")
    session.cached = list(tokens)
    return header


def _restore_slot(session: Any, state: bytes, tokens: list[int], path: str | Path) -> None:
    from edgepilot.engine.base import EngineError
    from edgepilot.engine.server_slots import restore_slot, slot_token_count

    if slot_token_count(state) is None:
        raise SessionFileError(f"{path} is damaged (its state is not a llama-server slot)")
    try:
        restored = restore_slot(session.engine, state)  # its own check of the file (an error otherwise)
    except EngineError as exc:
        raise CacheNotLoaded(f"llama-server refused the cache in {path}: {exc}") from None
    if restored <= 0:
        session.reset()
        raise CacheNotLoaded(f"llama-server refused the cache in {path} (damaged or another build)")


# the chat flag that sets each recorded setting to the saved value
_FLAG_FOR = {
    "n_ctx": lambda v: f"--ctx {v}",
    "type_k": lambda v: f"--kv {v}",
    "type_v": lambda v: f"--kv {v}",
    "flash_attn": lambda v: "--flash-attn" if v else "--no-flash-attn",
}
_NAMES = {"n_ctx": "context", "type_k": "K cache", "type_v": "V cache", "flash_attn": "flash attention"}


def _shown(key: str, value: Any) -> str:
    if key == "flash_attn" and isinstance(value, bool):
        return "on" if value else "off"
    return str(value)[:40]


def _differs(saved: Any, now: dict[str, Any]) -> str:
    """Which settings differ, and the flags that would load it: 'flash attention on (here off); start the
    chat with --flash-attn' (a tuned profile may have changed one: --no-profile leaves it out)."""
    if not isinstance(saved, dict):
        return "none recorded; it cannot be loaded here"
    keys = [k for k in now if saved.get(k) != now[k]]
    parts = [f"{_NAMES.get(k, k)} {_shown(k, saved.get(k))} (here {_shown(k, now[k])})" for k in keys[:4]]
    fixes = dict.fromkeys(_FLAG_FOR[k](saved[k]) for k in keys if k in _FLAG_FOR and saved.get(k) is not None)
    how = f"; start the chat with {' '.join(fixes)}" if fixes else ""
    return (", ".join(parts) or "unknown") + how
