"""A local hub serving real GGUF files: SmolLM2 135M and the bundled Gemma 3 270M (downloadable), and the 7B
header padded to its full size (listed and planned from its header, never downloaded)."""

from __future__ import annotations

import pytest
from hubserver import BIG, GEMMA, REPO, SMOL, Hub, HubFile, serving


@pytest.fixture
def hub(smollm_path, gemma_path, model_7b_file, monkeypatch, tmp_path):
    files = {
        SMOL: HubFile(smollm_path),
        GEMMA: HubFile(gemma_path),
        BIG: HubFile(model_7b_file, sha256="ab" * 32),
    }
    state = Hub(repos={REPO: files})
    with serving(state, monkeypatch, tmp_path / "store"):
        yield state
