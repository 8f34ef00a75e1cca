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
    import llama_cpp  # imported on use: device-only commands work without llama.cpp installed

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
