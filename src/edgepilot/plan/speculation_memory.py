"""What speculative decoding adds to llama-server's peak, on top of the target's own plan.

- The target verifies a draft of up to n_max tokens in one batch, so llama-server reserves n_max + 1 logits
  rows instead of one (server_output_limits: min(n_batch, 1 + n_max)), once in the output buffer and once in
  the compute graph's result: 2 x n_max x n_vocab x 4 bytes more. Measured on this machine at ctx 1024 with
  n-gram lookup's 48: SmolLM2 (49k tokens) +17 MiB, Gemma 3 270M (262k tokens) +93 MiB.
- A draft model is loaded in the same process with the target's context and batch, its KV cache in f16
  (llama-server's -ctkd/-ctvd default) and one output row: its own plan's weights, cache and buffers, without
  a second process runtime.

    speculation_bytes(n_vocab, settings, kind, n_max, draft, root) -> bytes on top of the target's plan
"""

from __future__ import annotations

import os
from dataclasses import replace

from edgepilot.plan.settings import EngineSettings

# llama.cpp's defaults when --draft-max is not given: --spec-draft-n-max 3, --spec-ngram-simple-size-m 48
DEFAULT_N_MAX = {"draft": 3, "lookup": 48}
LOGIT_BYTES = 4


def verify_rows_bytes(n_vocab: int, settings: EngineSettings, n_max: int) -> int:
    """The logits rows a verify batch needs beyond the one a plain run has (output buffer and graph)."""
    rows = min(settings.n_batch, 1 + n_max)
    return 2 * max(0, rows - 1) * n_vocab * LOGIT_BYTES


def draft_model_bytes(
    draft: str | os.PathLike[str], settings: EngineSettings, root: str | os.PathLike[str] = "/"
) -> int:
    """The draft's weights, KV cache, compute and output buffers at the target's context and batch, on the
    device at `root` (its CPU decides the repacked weights' buffers)."""
    from edgepilot.plan.planner import Planner, load_model_facts, read_device

    _, header, arch = load_model_facts(draft)
    planner = Planner(header, arch, read_device(root))
    memory = planner.predict(replace(settings, type_k="f16", type_v="f16")).memory
    return memory.peak_rss_bytes - memory.runtime_bytes


def speculation_bytes(
    n_vocab: int,
    settings: EngineSettings,
    kind: str,
    n_max: int | None = None,
    draft: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] = "/",
) -> int:
    """Bytes speculation adds to the target's planned peak (kind "lookup" or "draft")."""
    extra = verify_rows_bytes(n_vocab, settings, n_max if n_max is not None else DEFAULT_N_MAX[kind])
    if draft is not None:
        extra += draft_model_bytes(draft, settings, root)
    return extra
