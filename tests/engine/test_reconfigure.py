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
    switched = replace(base, n_ubatch=64, flash_attn=True, n_ctx=512)
    with LlamaEngine(smollm_path, base) as engine:
        model = engine._model
        assert _reply(engine, "The capital of France is").strip()
        engine.reconfigure(switched)
        assert engine._model is model  # the same weights: no reload
        assert (engine.load.n_ctx, engine.load.n_ubatch) == (512, 64)
        assert engine.settings.flash_attn is True
        after = _reply(engine, "The capital of France is")
        with pytest.raises(ValueError, match="model settings"):
            engine.reconfigure(replace(base, use_mmap=False))
        assert _reply(engine, "The capital of France is") == after  # a refused switch leaves it usable
    # the new context works: greedy, it says what a model loaded with those settings says (not what the old
    # one said: whether flash attention moves an argmax depends on this machine's kernels)
    with LlamaEngine(smollm_path, switched) as fresh:
        assert _reply(fresh, "The capital of France is") == after


def test_a_parked_context_is_swapped_back_in_without_a_new_one(smollm_path):
    base = EngineSettings(n_ctx=256, n_batch=256, n_ubatch=256, n_threads=1, flash_attn=False)
    with LlamaEngine(smollm_path, base) as engine:
        first_ctx = engine._ctx
        reply = _reply(engine, "The capital of France is")
        assert engine.reconfigure(replace(base, flash_attn=True), park=True) is True  # a new context
        on_ctx = engine._ctx
        assert engine.reconfigure(replace(base, n_threads=2), park=True) is False  # threads: same context
        assert engine._ctx is first_ctx and engine.settings.n_threads == 2
        assert _reply(engine, "The capital of France is") == reply
        assert engine.reconfigure(replace(base, flash_attn=True), park=True) is False
        assert engine._ctx is on_ctx
        assert engine.reconfigure(replace(base, n_ubatch=64), park=True) is True  # a third: one is freed
        assert engine._parked is not None and engine._parked[1] is on_ctx
