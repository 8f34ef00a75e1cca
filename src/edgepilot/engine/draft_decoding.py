"""A draft model in this process: llama.cpp's `draft-simple` (common/speculative.cpp) proposing, our own
verify loop (engine/lookup_decoding.py) deciding.

The draft keeps a KV cache of its own over the same text. Each step it catches up with what the target kept
(the tokens since its cache diverged, the last one chosen included, in one batch), then picks greedily, one
decode a token, up to n_max tokens (llama-server's --spec-draft-n-max, 3 by default; its --spec-draft-p-min is
0.0, so no pick is dropped for being unsure). The last pick is proposed without being decoded, as llama.cpp
does: if the target keeps it, the next catch-up decodes it. A greedy draft is a certain proposal, so the
loop's rule (sample each position from the target, stop at the first difference) keeps the target's
distribution at any temperature, as for lookup.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from edgepilot.engine.base import common_prefix
from edgepilot.engine.llama_binding import llama_cpp
from edgepilot.engine.sampling import GreedyPicker
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.speculation_memory import DEFAULT_N_MAX


def _own(settings: EngineSettings) -> EngineSettings:
    return replace(settings, type_k="f16", type_v="f16")


class DraftModel:
    """The draft's model and context (its KV cache in f16, llama-server's -ctkd/-ctvd default), the target's
    context size and batch. Close it (or use it as a context manager) to free them."""

    def __init__(self, path: str | Path, settings: EngineSettings, verbose: bool = False) -> None:
        from edgepilot.engine.inprocess import LlamaEngine

        self.engine = LlamaEngine(Path(path), _own(settings), verbose=verbose)
        self._batch = None
        self._on_context()

    def _on_context(self) -> None:
        ctx = self.engine._ctx  # noqa: SLF001
        self._pick = GreedyPicker(ctx, llama_cpp.llama_vocab_n_tokens(self.engine.vocab))
        self._memory = llama_cpp.llama_get_memory(ctx)
        self._n_batch = max(1, llama_cpp.llama_n_batch(ctx))
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
        self._batch = llama_cpp.llama_batch_init(self._n_batch, 0, 1)
        self._cached: list[int] = []  # the tokens the draft's KV cache holds, from position 0

    def follow(self, settings: EngineSettings) -> None:
        """The target's context changed (size, batch, threads): the draft's follows, its cache empty."""
        self.engine.reconfigure(_own(settings))
        self._on_context()

    def _decode(self, tokens: list[int]) -> None:
        """Append `tokens` to the draft's cache in batches of n_batch, logits for the last one only."""
        ctx, batch = self.engine._ctx, self._batch  # noqa: SLF001
        for start in range(0, len(tokens), self._n_batch):
            chunk = tokens[start : start + self._n_batch]
            batch.n_tokens = len(chunk)
            first = len(self._cached)
            for i, token in enumerate(chunk):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, first + i, 1
                batch.seq_id[i][0], batch.logits[i] = 0, int(start + i == len(tokens) - 1)
            rc = llama_cpp.llama_decode(ctx, batch)
            if rc != 0:
                self.engine._decode_failed(rc)  # noqa: SLF001
            self._cached.extend(chunk)

    def draft(self, kept: list[int], chosen: int, n_max: int = DEFAULT_N_MAX["draft"]) -> list[int]:
        """Up to n_max tokens the draft expects after `kept` (the text the target's cache holds) and `chosen`
        (the token the target just picked)."""
        if n_max < 1:
            return []
        text = [*kept, chosen]
        same = common_prefix(self._cached, text)
        same = min(same, len(text) - 1)  # the last token is decoded again for its logits
        if same < len(self._cached):
            llama_cpp.llama_memory_seq_rm(self._memory, 0, same, -1)
            del self._cached[same:]
        self._decode(text[same:])
        proposed: list[int] = []
        while True:
            token = self._pick()
            proposed.append(token)
            if len(proposed) >= n_max:
                return proposed
            self._decode([token])

    def close(self) -> None:
        if getattr(self, "_batch", None) is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        self.engine.close()

    def __enter__(self) -> DraftModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
