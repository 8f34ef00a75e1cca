"""Wrap a conversation in the model's chat template, as llama-cli's conversation mode does."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

from edgepilot.engine.llama_binding import llama_cpp


def apply_chat_template(model: llama_cpp.llama_model_p, user_text: str) -> str | None:
    """The prompt formatted for an assistant reply, or None when the model has no usable template."""
    return apply_chat_messages(model, [("user", user_text)])


def apply_chat_messages(model: llama_cpp.llama_model_p, messages: Sequence[tuple[str, str]]) -> str | None:
    """(role, content) pairs formatted for the next assistant reply; None when the model has no template
    llama.cpp recognises (a GGUF without tokenizer.chat_template is usually a base model)."""
    template = llama_cpp.llama_model_chat_template(model, None)
    if not template or not messages:
        return None
    encoded = [(role.encode("utf-8"), content.encode("utf-8")) for role, content in messages]
    array = (llama_cpp.llama_chat_message * len(encoded))(
        *(llama_cpp.llama_chat_message(role=r, content=c) for r, c in encoded)
    )
    size = max(1024, 2 * sum(len(c) + len(r) for r, c in encoded) + 512)
    for _ in range(2):
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_chat_apply_template(template, array, len(encoded), True, buf, size)
        if n < 0:  # llama.cpp does not recognise this template
            return None
        if n <= size:
            return buf.raw[:n].decode("utf-8", errors="replace")
        size = n + 1
    return None
