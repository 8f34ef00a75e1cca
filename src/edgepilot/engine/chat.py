"""Wrap a user prompt in the model's chat template, as llama-cli's conversation mode does."""

from __future__ import annotations

import ctypes

import llama_cpp


def apply_chat_template(model: llama_cpp.llama_model_p, user_text: str) -> str | None:
    """The prompt formatted for an assistant reply, or None when the model has no usable template."""
    template = llama_cpp.llama_model_chat_template(model, None)
    if not template:
        return None
    message = llama_cpp.llama_chat_message(role=b"user", content=user_text.encode("utf-8"))
    messages = (llama_cpp.llama_chat_message * 1)(message)
    size = max(1024, 2 * len(user_text.encode("utf-8")) + 512)
    for _ in range(2):
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_chat_apply_template(template, messages, 1, True, buf, size)
        if n < 0:  # llama.cpp does not recognise this template
            return None
        if n <= size:
            return buf.raw[:n].decode("utf-8", errors="replace")
        size = n + 1
    return None
