"""What each token the model chose does before the KV cache keeps it, in every generation loop (the plain one
in engine/inprocess.py, the lookup one in engine/lookup_decoding.py): end the generation at end-of-generation
when asked to, stream its text (decoded incrementally, so a character split across tokens arrives whole), or
let the caller end it."""

from __future__ import annotations

import codecs
from collections.abc import Callable
from typing import Any

from edgepilot.engine.llama_binding import llama_cpp


class TokenText:
    def __init__(
        self,
        vocab: Any,
        piece: Callable[[int], bytes],
        on_text: Callable[[str], bool | None] | None,
        stop_at_eog: bool,
    ) -> None:
        self._vocab, self._piece, self._on_text, self._stop_at_eog = vocab, piece, on_text, stop_at_eog
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        self._is_eog = llama_cpp.llama_vocab_is_eog

    def stop_reason(self, token: int) -> str | None:
        """None: generation goes on with `token`. "eog": it ends before it. "caller": on_text asked to end
        after its text (the token counts as generated; the cache does not keep it)."""
        if self._stop_at_eog and self._is_eog(self._vocab, token):
            return "eog"
        if self._on_text is not None:
            text = self._decode(self._piece(token))
            if text and self._on_text(text):
                return "caller"
        return None

    def finish(self, stopped_by: str) -> None:
        """The decoder's last bytes (an incomplete character, replaced), unless the caller ended it."""
        if self._on_text is not None and stopped_by != "caller":
            tail = self._decode(b"", final=True)
            if tail:
                self._on_text(tail)
