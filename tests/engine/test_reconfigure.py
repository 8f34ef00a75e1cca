"""A fresh context on a loaded model: what tune switches ubatch and flash attention with (no reload)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from edgepilot.engine.inprocess import LlamaEngine
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.plan.settings import EngineSettings

GREEDY = SamplerSettings(temperature=0)


def _reply(engine: LlamaEngine, prompt: str) -> str:
    pieces: list[str] = []
    engine.generate(engine.tokenize(prompt), 8, sampler=GREEDY, on_text=pieces.append)
    return "".join(pieces)


def test_reconfigure_switches_context_settings_without_a_reload(smollm_path):
    base = EngineSettings(n_ctx=256, n_batch=256, n_ubatch=256, n_threads=1, flash_attn=False)
    with LlamaEngine(smollm_path, base) as engine:
        model = engine._model
        first = _reply(engine, "The capital of France is")
        engine.reconfigure(replace(base, n_ubatch=64, flash_attn=True, n_ctx=512))
        assert engine._model is model  # the same weights: no reload
        assert (engine.load.n_ctx, engine.load.n_ubatch) == (512, 64)
        assert engine.settings.flash_attn is True
        # the new context works and, greedy, says the same (flash attention does not change the argmax here)
        assert _reply(engine, "The capital of France is") == first
        with pytest.raises(ValueError, match="model settings"):
            engine.reconfigure(replace(base, use_mmap=False))
        assert _reply(engine, "The capital of France is") == first  # a refused switch leaves it usable
