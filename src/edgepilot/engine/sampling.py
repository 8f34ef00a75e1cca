"""Sampler settings and the llama.cpp sampler chain built from them (sampling stays in C)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgepilot.errors import UserError


@dataclass(frozen=True)
class SamplerSettings:
    """llama-cli's defaults; temperature 0 means greedy (deterministic)."""

    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    seed: int = 0xFFFFFFFF  # LLAMA_DEFAULT_SEED: a random seed

    def validate(self) -> SamplerSettings:
        if self.temperature < 0:
            raise UserError("temperature must be 0 or more")
        if not 0 < self.top_p <= 1 or not 0 <= self.min_p <= 1:
            raise UserError("top-p must be in (0, 1] and min-p in [0, 1]")
        return self


def build_chain(settings: SamplerSettings) -> Any:
    from edgepilot.engine.llama_binding import llama_cpp  # on use: device commands need no llama.cpp

    params = llama_cpp.llama_sampler_chain_default_params()
    params.no_perf = True
    chain = llama_cpp.llama_sampler_chain_init(params)
    if settings.temperature == 0:
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        return chain
    if settings.top_k > 0:
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_k(settings.top_k))
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_top_p(settings.top_p, 1))
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_min_p(settings.min_p, 1))
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_temp(settings.temperature))
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_dist(settings.seed))
    return chain


class GreedyPicker:
    """Temperature 0: the highest logit of the last output, read in place (numpy argmax over llama.cpp's
    logits buffer). Same token as llama.cpp's greedy sampler (the first maximum wins in both), but without
    its per-token copy of the whole vocabulary into a token-data array: with Gemma's 262k-token vocabulary
    that copy is ~0.4-0.8 ms a token here, several percent of a 270M model's generation time."""

    def __init__(self, ctx: Any, n_vocab: int) -> None:
        import numpy as np

        from edgepilot.engine.llama_binding import llama_cpp

        self._ctx, self._n_vocab = ctx, n_vocab
        self._logits_ith, self._as_array = llama_cpp.llama_get_logits_ith, np.ctypeslib.as_array
        self._addr: int | None = None
        self._view: Any = None

    def __call__(self) -> int:
        import ctypes

        ptr = self._logits_ith(self._ctx, -1)  # synchronizes with the decode in flight
        addr = ctypes.cast(ptr, ctypes.c_void_p).value
        if not addr:
            raise RuntimeError("llama.cpp returned no logits for the last token")
        if addr != self._addr:  # the output buffer moves only when llama.cpp reallocates it
            self._addr, self._view = addr, self._as_array(ptr, shape=(self._n_vocab,))
        return int(self._view.argmax())

    def at(self, i: int) -> int:
        """The highest logit at batch index i (a batch that asked for logits at several positions)."""
        ptr = self._logits_ith(self._ctx, i)
        if not ptr:
            raise RuntimeError(f"llama.cpp returned no logits for batch index {i}")
        return int(self._as_array(ptr, shape=(self._n_vocab,)).argmax())
