"""Temperature 0 picks the argmax in place (GreedyPicker): the same tokens as llama.cpp's sampler chain."""

from __future__ import annotations

import pytest

from edgepilot.engine.inprocess import LlamaEngine
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.plan.settings import EngineSettings

PROMPT = "Write a long story about a robot who learns to paint. Once upon a time,"


@pytest.mark.parametrize("model", ["gemma", "smollm"])
def test_greedy_picker_matches_the_llama_cpp_chain(model, gemma_path, smollm_path):
    path = gemma_path if model == "gemma" else smollm_path
    with LlamaEngine(path, EngineSettings(n_ctx=256, n_threads=2)) as engine:
        tokens = engine.tokenize(PROMPT)

        def generate(sampler: SamplerSettings) -> tuple[str, int]:
            pieces: list[str] = []
            stats = engine.generate(tokens, 24, sampler=sampler, on_text=pieces.append, stop_at_eog=False)
            return "".join(pieces), stats.n_gen

        ours = generate(SamplerSettings(temperature=0))
        # top-k 1 leaves llama.cpp's chain (top-k, top-p, min-p, temp, dist) only the highest logit
        theirs = generate(SamplerSettings(temperature=0.7, top_k=1, seed=7))
    assert ours == theirs
    assert ours[1] == 24 and ours[0].strip()
