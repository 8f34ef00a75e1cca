"""Architecture hyper-parameters: which layers slide, which are recurrent, defaults llama.cpp applies."""

from __future__ import annotations

import pytest

from edgepilot.errors import UserError
from edgepilot.gguf.arch import arch_params
from edgepilot.gguf.gguf_records import SkippedValue


def md(arch: str, n_layer: int, **keys) -> dict:
    out = {
        "general.architecture": arch,
        f"{arch}.block_count": n_layer,
        f"{arch}.embedding_length": 1024,
        f"{arch}.attention.head_count": 8,
    }
    out.update({f"{arch}.{k.replace('__', '.')}": v for k, v in keys.items()})
    return out


def swa_layers(p) -> list[int]:
    return [il for il, s in enumerate(p.is_swa) if s]


def test_defaults_follow_llama_cpp():
    p = arch_params(md("llama", 4))
    assert (p.head_k, p.head_v, p.n_head_kv, p.swa_type) == (128, 128, [8] * 4, "none")
    assert p.n_vocab is None and p.n_ctx_train is None


def test_vocab_from_token_list_when_no_vocab_size():
    m = md("llama", 2)
    m["tokenizer.ggml.tokens"] = SkippedValue("array[string]", 151936)
    assert arch_params(m).n_vocab == 151936


@pytest.mark.parametrize(
    ("arch", "n_layer", "keys", "expected_swa", "n_swa", "swa_type"),
    [
        ("gemma3", 12, {"attention__sliding_window": 512}, [0, 1, 2, 3, 4, 6, 7, 8, 9, 10], 512, "standard"),
        ("gemma3", 12, {}, [], 0, "none"),  # no window: every layer full (src/models/gemma3.cpp)
        ("gemma2", 4, {}, [0, 2], 4096, "standard"),  # default window 4096, every other layer
        ("cohere2", 8, {"attention__sliding_window": 4096}, [0, 1, 2, 4, 5, 6], 4096, "standard"),
        ("cohere2moe", 8, {"attention__sliding_window": 4096}, [1, 2, 3, 5, 6, 7], 4096, "standard"),
        ("llama4", 8, {"attention__sliding_window": 1234}, [0, 1, 2, 4, 5, 6], 8192, "chunked"),
        ("llama4", 8, {"attention__sliding_window": 0}, [], 0, "none"),
        ("gpt-oss", 4, {"attention__sliding_window": 128}, [0, 2], 128, "standard"),
        ("olmo2", 4, {}, [], 0, "none"),
        (
            "exaone4",
            64,
            {"attention__sliding_window": 4096},
            [il for il in range(64) if il % 4 < 3],
            4096,
            "standard",
        ),
        ("exaone4", 30, {"attention__sliding_window": 4096}, [], 0, "none"),
        ("qwen2", 4, {"attention__sliding_window": 4096}, [], 0, "none"),  # llama.cpp ignores it
    ],
)
def test_sliding_window_patterns(arch, n_layer, keys, expected_swa, n_swa, swa_type):
    p = arch_params(md(arch, n_layer, **keys))
    assert swa_layers(p) == expected_swa
    assert (p.n_swa, p.swa_type) == (n_swa, swa_type)


def test_pattern_overrides_from_the_gguf():
    p = arch_params(md("gemma3", 6, attention__sliding_window=512, attention__sliding_window_pattern=3))
    assert swa_layers(p) == [0, 1, 3, 4]
    p = arch_params(
        md(
            "gemma3",
            4,
            attention__sliding_window=512,
            attention__sliding_window_pattern=[True, False, False, True],
        )
    )
    assert swa_layers(p) == [0, 3]


def test_swa_head_sizes():
    p = arch_params(
        md(
            "gemma4",
            4,
            attention__sliding_window=1024,
            attention__sliding_window_pattern=[1, 1, 1, 0],
            attention__key_length=512,
            attention__value_length=512,
            attention__key_length_swa=256,
            attention__value_length_swa=256,
            attention__head_count_kv=2,
        )
    )
    assert [p.n_embd_k_gqa(il) for il in range(4)] == [512, 512, 512, 1024]


def test_kv_reuse_layers_have_no_cache():
    p = arch_params(md("gemma3n", 30, attention__sliding_window=512))
    assert p.attention_layers() == list(range(20))


def test_mtp_layers_are_not_cached():
    p = arch_params(md("glm4moe", 47, nextn_predict_layers=1))
    assert p.n_layer == 46 and len(p.attention_layers()) == 46


def test_interval_hybrid():
    p = arch_params(
        md(
            "qwen3next",
            8,
            full_attention_interval=4,
            ssm__conv_kernel=4,
            ssm__inner_size=512,
            ssm__state_size=16,
            ssm__group_count=2,
        )
    )
    assert p.attention_layers() == [3, 7] and len(p.recurrent_layers()) == 6
    assert p.n_embd_r == 3 * (512 + 2 * 2 * 16) and p.n_embd_s == 16 * 512


def test_lfm2_attention_layers_slide():
    p = arch_params(md("lfm2", 4, attention__head_count_kv=[0, 2, 0, 2], attention__sliding_window=512))
    assert swa_layers(p) == [1, 3] and p.attention_layers() == [1, 3] and p.n_swa == 512


def test_encoders_have_no_cache():
    assert arch_params(md("bert", 12)).attention_layers() == []


@pytest.mark.parametrize("missing", ["general.architecture", "llama.block_count", "llama.embedding_length"])
def test_missing_required_keys(missing):
    m = md("llama", 4)
    del m[missing]
    with pytest.raises(UserError):
        arch_params(m)
