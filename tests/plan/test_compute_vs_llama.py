"""The planner's compute-buffer and reserve formulas against llama.cpp itself (dry run and real loads)."""

from __future__ import annotations

import re

import pytest

from edgepilot.engine import llama_log
from edgepilot.engine.dry_run import dry_run
from edgepilot.engine.inprocess import LlamaEngine
from edgepilot.gguf.arch import arch_params
from edgepilot.gguf.gguf_header import read_header
from edgepilot.plan.fit import read_device
from edgepilot.plan.memory_model import predict
from edgepilot.plan.settings import EngineSettings

GRID = [
    (ctx, ub, fa, kv)
    for ctx in (256, 1024, 4096, 16384, 32768)
    for ub in (32, 128, 512)
    for fa, kv in ((False, "f16"), (True, "f16"), (True, "q8_0"))
]


@pytest.mark.parametrize("model", ["smollm", "gemma"])
def test_compute_buffer_matches_llama_dry_run(model, smollm_path, gemma_path):
    path = smollm_path if model == "smollm" else gemma_path
    header = read_header(path)
    arch = arch_params(header.metadata)
    worst = 0.0
    for ctx, ub, fa, kv in GRID:
        s = EngineSettings(
            n_ctx=ctx, n_batch=512, n_ubatch=ub, type_k=kv, type_v=kv, flash_attn=fa, n_threads=2
        )
        measured = dry_run(path, s).compute_bytes
        predicted = predict(header, arch, s, {}).compute.reserved_bytes
        err = abs(predicted - measured) / measured
        worst = max(worst, err)
        assert err < 0.05, (ctx, ub, fa, kv, predicted / 2**20, measured / 2**20)
    assert worst < 0.05


@pytest.mark.parametrize(
    "model, settings",
    [
        ("smollm", EngineSettings(n_ctx=2048, n_threads=2)),
        (
            "smollm",
            EngineSettings(
                n_ctx=8192, n_ubatch=128, type_k="q8_0", type_v="q8_0", flash_attn=True, n_threads=2
            ),
        ),
        ("smollm", EngineSettings(n_ctx=1024, use_mmap=False, n_threads=2)),
        ("gemma", EngineSettings(n_ctx=2048, n_threads=2)),
        ("gemma", EngineSettings(n_ctx=4096, n_ubatch=128, use_mmap=False, n_threads=2)),
    ],
)
def test_reserved_bytes_match_llama_logged_buffers(model, settings, smollm_path, gemma_path):
    path = smollm_path if model == "smollm" else gemma_path
    header = read_header(path)
    plan = read_device("/").cpu.repack_plan()  # this machine's CPU decides what llama.cpp repacks
    predicted = predict(header, arch_params(header.metadata), settings, plan).memory.reserved_bytes
    start = llama_log.mark()
    with LlamaEngine(path, settings):
        text = "".join(llama_log.lines_since(start))
    logged = sum(float(m) for m in re.findall(r"buffer size =\s+([\d.]+) MiB", text)) * 2**20
    assert logged > 0
    assert abs(predicted - logged) / logged < 0.02, (predicted / 2**20, logged / 2**20)
