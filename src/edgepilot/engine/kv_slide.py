"""A KV cache that slides: when a conversation outgrows its context and its oldest turns are dropped, the
turns kept move down in the cache instead of being processed again.

After the prompt's common prefix with the cache (the system prompt), each run of at least MIN_CHUNK tokens of
the new prompt that appears next in the cache is shifted to its new position: the cells in between are
removed (llama_memory_seq_rm) and the run's positions lowered (llama_memory_seq_add; llama.cpp re-applies
RoPE to the shifted keys at the next decode). This is llama-server's `--cache-reuse` (server-context.cpp),
so both engines slide the same way. A memory that cannot shift (a sliding-window cache without swa_full,
M-RoPE, a recurrent state: llama_memory_can_shift false) cannot slide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIN_CHUNK = 16  # a shorter run is not worth a shift (llama-server's --cache-reuse takes the same threshold)


@dataclass(frozen=True)
class Move:
    src: int  # the run's first position in the cache now
    dst: int  # its position in the new prompt (<= src)
    n: int


def plan_moves(
    cached: list[int], tokens: list[int], n_past: int, limit: int, min_chunk: int = MIN_CHUNK
) -> list[Move]:
    """The runs of `tokens` after `n_past` (the common prefix) found next in `cached`, in order, none reaching
    past `limit` in the new prompt (one prompt token is always left to process, for the logits)."""
    moves: list[Move] = []
    head_c = head_p = n_past
    while head_c < len(cached) and head_p < limit:
        n = 0
        while head_c + n < len(cached) and head_p + n < limit and cached[head_c + n] == tokens[head_p + n]:
            n += 1
        if n >= min_chunk:
            moves.append(Move(head_c, head_p, n))
            head_c += n
            head_p += n
        else:
            head_c += 1
    return moves


def kept_after(moves: list[Move], n_past: int) -> int:
    """How many prompt tokens the cache holds after the moves (all in order from position 0)."""
    return moves[-1].dst + moves[-1].n if moves else n_past


def apply_moves(memory: object, llama_cpp: object, moves: list[Move], cached: list[int]) -> None:
    """Shift the runs in llama.cpp's memory (sequence 0) and in `cached`, as llama-server does."""
    for m in moves:
        if m.src != m.dst:
            binding: Any = llama_cpp
            binding.llama_memory_seq_rm(memory, 0, m.dst, m.src)
            binding.llama_memory_seq_add(memory, 0, m.src, m.src + m.n, m.dst - m.src)
            cached[m.dst : m.dst + m.n] = cached[m.src : m.src + m.n]


def slide_note(can_shift: bool, n_swa: int) -> str:
    """What a full context does, said once: slide, or (a memory that cannot shift) process the kept turns
    again."""
    if can_shift:
        return "the cached turns kept slide down: only the new message is processed"
    why = (
        f"a sliding-window cache ({n_swa} tokens) without --swa-full" if n_swa else "its memory cannot shift"
    )
    return f"this model's cache cannot slide ({why}): after a drop, the kept turns are processed again"


def context_shift(turn: Any) -> dict[str, int]:
    """design.md's `context_shift` of a turn that dropped old turns (engine/base.TurnStats): the cached
    tokens dropped, those kept (slid, or the common prefix) and the kept ones processed again."""
    return {
        "dropped": max(0, turn.n_cached_before - turn.n_reused - turn.n_recomputed),
        "kept": turn.n_reused,
        "recomputed": turn.n_recomputed,
    }
