"""What speculative decoding adds to llama-server's peak, on top of the target's own plan.

- The target verifies a draft of up to n_max tokens in one batch, so llama-server reserves n_max + 1 logits
  rows instead of one (server_output_limits: min(n_batch, 1 + n_max)): n_max x n_vocab x 4 bytes more in the
  output buffer, and the verify graph's result of n_max + 1 rows in the compute buffer, which costs only what
  it needs beyond the part of that buffer the target's own prompt already touched (ggml-alloc places each
  graph in the same buffer from its start). Measured on this machine at ctx 1024 with n-gram lookup's 48, the
  context filled: SmolLM2 (49k tokens, 9 MiB of rows; the prompt's attention touched more than the result
  needs) +10 MiB, Gemma 3 270M (262k tokens: 48 MiB of rows and a 49 MiB result over the 17.5 MiB touched)
  +80 MiB.
- A draft model is loaded in the same process with the target's context and batch, its KV cache in f16
  (llama-server's -ctkd/-ctvd default) and one output row: its own plan's weights, cache and buffers and its
  own vocabulary's structures, without a second process runtime. Measured (llama-server, Gemma 3 270M drafting
  for itself at ctx 1024, a prompt filling the context, /proc/PID/smaps after 64 tokens): the draft adds its
  whole file (235 MiB), 56 MiB of anonymous memory (its buffers: 53 MiB planned) and 64 MiB of heap: its
  vocabulary's structures (262k tokens, 39 MiB at the 155 bytes a token the runtime is calibrated with) and
  25 MiB more that also grows with the vocabulary (its GGUF's token arrays read at load, its samplers'
  candidate rows, the allocator's slack): DRAFT_HEAP_BYTES_PER_TOKEN, fitted on Gemma (28 MiB short without
  it) and checked on SmolLM2 (49k tokens: +163 MiB planned, +160 measured).

    speculation_bytes(n_vocab, settings, kind, n_max, draft, root, compute_touched) -> bytes on top of the
    target's plan
"""

from __future__ import annotations

import os
from dataclasses import replace

from edgepilot.plan.settings import EngineSettings

# llama.cpp's defaults when --draft-max is not given: --spec-draft-n-max 3, --spec-ngram-simple-size-m 48
DEFAULT_N_MAX = {"draft": 3, "lookup": 48}
LOGIT_BYTES = 4
# a draft's heap beyond its vocabulary's structures, per token of its vocabulary (see the docstring)
DRAFT_HEAP_BYTES_PER_TOKEN = 110


def verify_rows_bytes(n_vocab: int, settings: EngineSettings, n_max: int, compute_touched: int) -> int:
    """The logits rows a verify batch needs beyond the one a plain run has: in the output buffer, and the
    graph's result where it outgrows the `compute_touched` bytes of the target plan's compute buffer."""
    rows = min(settings.n_batch, 1 + n_max)
    output_buffer = max(0, rows - 1) * n_vocab * LOGIT_BYTES
    return output_buffer + max(0, rows * n_vocab * LOGIT_BYTES - compute_touched)


def draft_model_bytes(
    draft: str | os.PathLike[str], settings: EngineSettings, root: str | os.PathLike[str] = "/"
) -> int:
    """The draft's weights, KV cache, compute and output buffers and vocabulary at the target's context and
    batch, on the device at `root` (its CPU decides the repacked weights' buffers); offloaded as the target
    is, without a second GPU driver (lavapipe, SmolLM2 drafting for itself on every layer: 94 MiB over the
    measured peak while the draft counted one)."""
    from edgepilot.plan.memory_model import vocab_bytes
    from edgepilot.plan.planner import Planner, load_model_facts, read_device

    _, header, arch = load_model_facts(draft)
    gpu = None if settings.on_cpu else str(settings.device)
    device = read_device(root, gpu)
    if gpu is not None:  # the driver is the process's, counted once in the target's plan
        device.drivers[gpu] = replace(device.drivers[gpu], base_bytes=0, per_type_bytes=0)
    planner = Planner(header, arch, device)
    memory = planner.predict(replace(settings, type_k="f16", type_v="f16")).memory
    own_heap = vocab_bytes(arch) + DRAFT_HEAP_BYTES_PER_TOKEN * (arch.n_vocab or 0)
    return memory.peak_rss_bytes - memory.runtime_bytes + own_heap


def speculation_bytes(
    n_vocab: int,
    settings: EngineSettings,
    kind: str,
    n_max: int | None = None,
    draft: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] = "/",
    compute_touched: int = 0,
) -> int:
    """Bytes speculation adds to the target's planned peak (kind "lookup" or "draft"); compute_touched: the
    target plan's touched compute buffer."""
    n_max = n_max if n_max is not None else DEFAULT_N_MAX[kind]
    extra = verify_rows_bytes(n_vocab, settings, n_max, compute_touched)
    if draft is not None:
        extra += draft_model_bytes(draft, settings, root)
    return extra
