"""KV cache sizes against llama.cpp's own figures (references.md "Measured here") and its allocation rules."""

from __future__ import annotations

import json

import pytest

from edgepilot.gguf.arch import arch_params
from edgepilot.gguf.gguf_header import read_header
from edgepilot.gguf.kv_cache import kv_cache_bytes
from edgepilot.jsonable import dumps

MiB = 1 << 20


def params_of(path):
    return arch_params(read_header(path).metadata)


# --- the measured figures (llama-cpp-python 0.3.36, logged KV buffer sizes) ---

SMOLLM_MEASURED = [  # (n_ctx, type_k, type_v, flash_attn, MiB)
    (512, "f16", "f16", False, 11.25),
    (2048, "f16", "f16", False, 45.0),
    (8192, "f16", "f16", False, 180.0),
    (32768, "f16", "f16", False, 720.0),
    (32768, "q8_0", "q8_0", True, 382.5),
]
GEMMA_MEASURED = [(2048, 6.0, 30.0), (32768, 96.0, 480.0)]  # (n_ctx, full layers MiB, SWA layers MiB)


@pytest.mark.parametrize(("n_ctx", "tk", "tv", "fa", "mib"), SMOLLM_MEASURED)
def test_smollm2_synthetic_matches_measured(synth_models, n_ctx, tk, tv, fa, mib):
    kv = kv_cache_bytes(params_of(synth_models["smollm2"]), n_ctx, tk, tv, flash_attn=fa)
    assert kv.buffer_bytes == mib * MiB
    assert kv.refusals == [] and kv.n_layers_full == 30 and kv.cells_swa == 0


@pytest.mark.parametrize(("n_ctx", "full", "swa"), GEMMA_MEASURED)
def test_gemma3_synthetic_matches_measured(synth_models, n_ctx, full, swa):
    kv = kv_cache_bytes(params_of(synth_models["gemma3"]), n_ctx)  # swa_full=True: llama.cpp's default
    assert (kv.full_bytes / MiB, kv.swa_bytes / MiB) == (full, swa)
    assert (kv.n_layers_full, kv.n_layers_swa) == (3, 15)


def test_real_smollm2_matches_measured(real_smollm):
    p = params_of(real_smollm)
    for n_ctx, tk, tv, fa, mib in SMOLLM_MEASURED:
        assert kv_cache_bytes(p, n_ctx, tk, tv, flash_attn=fa).buffer_bytes == mib * MiB


def test_real_gemma_matches_measured(real_gemma):
    p = params_of(real_gemma)
    assert (p.arch, p.n_swa, p.is_swa[:6]) == ("gemma3", 512, [True] * 5 + [False])
    for n_ctx, full, swa in GEMMA_MEASURED:
        kv = kv_cache_bytes(p, n_ctx)
        assert (kv.full_bytes / MiB, kv.swa_bytes / MiB) == (full, swa)


# --- llama.cpp's allocation rules ---


def test_cells_are_padded_to_256(synth_models):
    p = params_of(synth_models["smollm2"])
    kv = kv_cache_bytes(p, 1000)
    assert kv.cells_full == 1024 and kv.n_ctx == 1024
    assert kv.buffer_bytes == kv_cache_bytes(p, 1024).buffer_bytes


def test_sliding_window_cache_when_not_kept_full(synth_models):
    p = params_of(synth_models["gemma3"])
    kv = kv_cache_bytes(p, 32768, swa_full=False, n_ubatch=512)
    assert kv.cells_swa == 1024  # pad256(min(32768, 512 window + 512 ubatch))
    assert kv.swa_bytes == 15 * 2 * 256 * 1024 * 2 and kv.full_bytes == 96 * MiB
    assert kv_cache_bytes(p, 32768, swa_full=False, n_ubatch=100).cells_swa == 768  # pad256(612)
    assert kv_cache_bytes(p, 256, swa_full=False).cells_swa == 256  # n_ubatch is capped by n_ctx first
    unified = kv_cache_bytes(p, 32768, n_seq=2, swa_full=False, kv_unified=True)
    assert unified.cells_swa == 1536 and unified.n_stream == 1  # pad256(512 * 2 + 512)


def test_sequences_split_the_context_into_streams(synth_models):
    p = params_of(synth_models["smollm2"])
    kv = kv_cache_bytes(p, 1000, n_seq=3)
    assert (kv.n_ctx_seq, kv.n_stream, kv.n_ctx) == (512, 3, 1536)  # pad256(1024 / 3) cells per stream
    assert kv.buffer_bytes == 3 * kv_cache_bytes(p, 512).buffer_bytes
    assert (
        kv_cache_bytes(p, 4096, n_seq=4, kv_unified=True).buffer_bytes == kv_cache_bytes(p, 4096).buffer_bytes
    )


def test_n_ctx_zero_means_training_context(synth_models):
    p = params_of(synth_models["qwen2"])
    assert kv_cache_bytes(p, 0).n_ctx == 32768


def test_qwen2(synth_models):
    # Qwen2.5-0.5B: 24 layers x 2 KV heads x 64, K and V, f16 -> 48 MiB at 4096 (llama.cpp logs 48.00 MiB)
    assert kv_cache_bytes(params_of(synth_models["qwen2"]), 4096).buffer_bytes == 48 * MiB


def test_phi3_sliding_window_is_ignored(synth_models):
    p = params_of(synth_models["phi3"])
    assert p.swa_type == "none" and any("phi3" in n for n in p.notes)
    assert kv_cache_bytes(p, 4096).buffer_bytes == 1536 * MiB  # 32 layers x 3072 x 4096 x 2 x 2 bytes


def test_deepseek2_mla_caches_k_only(synth_models):
    p = params_of(synth_models["deepseek2"])
    assert p.is_mla and p.n_head_kv[0] == 1
    kv = kv_cache_bytes(p, 4096)
    assert kv.v_bytes_full == 0
    assert kv.k_bytes_full == 27 * (512 + 64) * 4096 * 2  # kv_lora_rank + rope dims per token and layer
    assert kv_cache_bytes(p, 4096, "q8_0", "f16", flash_attn=True).refusals  # MLA needs type_k == type_v


def test_deepseek2_without_mla_keys_is_plain_attention():
    md = {
        "general.architecture": "deepseek2",
        "deepseek2.block_count": 27,
        "deepseek2.embedding_length": 2048,
        "deepseek2.attention.head_count": 16,
        "deepseek2.attention.head_count_kv": 16,
        "deepseek2.attention.key_length": 192,
        "deepseek2.attention.value_length": 128,
    }
    kv = kv_cache_bytes(arch_params(md), 4096)
    assert kv.k_bytes_full == 27 * 16 * 192 * 4096 * 2 and kv.v_bytes_full == 27 * 16 * 128 * 4096 * 2


def test_mamba_state_does_not_grow_with_context(synth_models):
    p = params_of(synth_models["mamba"])
    small, big = kv_cache_bytes(p, 512), kv_cache_bytes(p, 65536)
    # mamba-130m: 24 layers x ((4 - 1) * 1536 conv + 16 * 1536 ssm) f32 per sequence
    assert small.buffer_bytes == big.buffer_bytes == 24 * 4 * (3 * 1536 + 16 * 1536)
    assert small.k_bytes_full == 0 and small.n_layers_recurrent == 24
    assert kv_cache_bytes(p, 512, n_seq=3).recurrent_bytes == 3 * small.recurrent_bytes


def test_rwkv_state():
    md = {
        "general.architecture": "rwkv6",
        "rwkv6.block_count": 24,
        "rwkv6.embedding_length": 2048,
        "rwkv6.wkv.head_size": 64,
    }
    kv = kv_cache_bytes(arch_params(md), 4096)
    assert kv.buffer_bytes == 24 * 4 * (2 * 2048 + 2048 * 64)


def test_hybrid_attention_and_ssm_layers():
    md = {
        "general.architecture": "jamba",
        "jamba.block_count": 8,
        "jamba.embedding_length": 1024,
        "jamba.attention.head_count": 8,
        "jamba.attention.head_count_kv": [0, 0, 0, 2, 0, 0, 0, 2],
        "jamba.ssm.conv_kernel": 4,
        "jamba.ssm.inner_size": 2048,
        "jamba.ssm.state_size": 16,
    }
    p = arch_params(md)
    assert p.attention_layers() == [3, 7] and len(p.recurrent_layers()) == 6
    kv = kv_cache_bytes(p, 1024)
    assert kv.full_bytes == 2 * 2 * (2 * 128) * 1024 * 2
    assert kv.recurrent_bytes == 6 * 4 * (3 * 2048 + 16 * 2048)


def test_per_layer_kv_heads_pad_v_without_flash_attention():
    md = {
        "general.architecture": "llama",
        "llama.block_count": 4,
        "llama.embedding_length": 512,
        "llama.attention.head_count": 8,
        "llama.attention.head_count_kv": [1, 2, 1, 4],
    }
    p = arch_params(md)
    fa = kv_cache_bytes(p, 256, flash_attn=True)
    assert fa.k_bytes_full == fa.v_bytes_full == (1 + 2 + 1 + 4) * 64 * 256 * 2
    no_fa = kv_cache_bytes(p, 256)
    assert no_fa.v_bytes_full == 4 * (4 * 64) * 256 * 2  # every layer's V as wide as the widest


def test_refusals_in_llama_cpp_words(synth_models):
    p = params_of(synth_models["smollm2"])
    assert kv_cache_bytes(p, 512, "q8_0", "q8_0").refusals == [
        "quantized V cache requires flash_attn to be enabled"
    ]
    assert kv_cache_bytes(p, 512, "q8_0", "f16").refusals == []  # a quantized K alone is fine
    md = {
        "general.architecture": "phi2",
        "phi2.block_count": 2,
        "phi2.embedding_length": 2560,
        "phi2.attention.head_count": 32,
    }  # head size 80
    msg = kv_cache_bytes(arch_params(md), 512, "q4_0", "q4_0", flash_attn=True).refusals
    assert msg and "does not divide n_embd_head_k=80" in msg[0]
    with pytest.raises(ValueError):
        kv_cache_bytes(p, 512, "q3_k_x")


def test_quantized_cache_rotation_matrices(synth_models):
    p = params_of(synth_models["gemma3"])
    assert kv_cache_bytes(p, 512).rotation_bytes == 0
    kv = kv_cache_bytes(p, 512, "q8_0", "q8_0", flash_attn=True)
    assert kv.rotation_bytes == 2 * 4 * (64**2 + 128**2 + 256**2)  # per cache: full and SWA
    assert kv.total_bytes == kv.buffer_bytes + kv.rotation_bytes


def test_result_is_jsonable(synth_models):
    kv = kv_cache_bytes(params_of(synth_models["gemma3"]), 2048)
    assert json.loads(dumps(kv))["buffer_bytes"] == 36 * MiB
