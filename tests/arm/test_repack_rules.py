"""Repack rules per tensor and per CPU feature set, the tied-output duplicate, and what each load mode keeps
resident. Synthetic headers pin the rules of the vendored repack.cpp / llama-model-loader.cpp; the real
headers on real device trees pin the totals llama.cpp logs on aarch64 (benchmarks/arm_memory.py). No lane.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from edgepilot.device.isa import repack_plan, summarize
from edgepilot.gguf.arch import arch_params
from edgepilot.gguf.gguf_header import read_header
from edgepilot.gguf.gguf_records import TensorInfo
from edgepilot.plan.fit import read_device
from edgepilot.plan.memory_model import predict
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.weights import estimate_weights, repack_layout

DEVICES = Path(__file__).resolve().parents[1] / "devices"
MIB = 1 << 20
I8MM = repack_plan({"i8mm", "dotprod"})
DOTPROD = repack_plan({"dotprod"})
NEON_ONLY = repack_plan(set())
AVX2 = repack_plan({"avx2"})
# ggml block sizes: bytes per 32 (or 256 for K-quants) weights
BLOCK = {"Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q4_K": (256, 144), "Q6_K": (256, 210)}
F32 = (1, 4)


class _File:
    """Tensors laid out back to back as in a GGUF data section (32-byte aligned offsets)."""

    def __init__(self) -> None:
        self.tensors: list[TensorInfo] = []
        self.end = 0

    def add(self, name: str, shape: list[int], type_name: str) -> TensorInfo:
        per, size = BLOCK.get(type_name, F32)
        n = 1
        for d in shape:
            n *= d
        t = TensorInfo(name, shape, 0, type_name, self.end, n, n // per * size)
        self.tensors.append(t)
        self.end = (self.end + (t.n_bytes or 0) + 31) // 32 * 32
        return t


def _tensor(name: str, shape: list[int], type_name: str) -> TensorInfo:
    return _File().add(name, shape, type_name)


@pytest.mark.parametrize(
    "type_name, plan, layout",
    [
        ("Q4_K", I8MM, "q4_K_8x8"),
        ("Q4_K", DOTPROD, "q4_K_8x4"),
        ("Q4_K", AVX2, "q4_K_8x8"),
        ("Q4_K", NEON_ONLY, None),
        ("Q6_K", I8MM, "q6_K_8x8"),
        ("Q6_K", DOTPROD, "q6_K_8x4"),
        ("Q6_K", AVX2, None),
        ("Q8_0", I8MM, "q8_0_4x8"),
        ("Q8_0", DOTPROD, "q8_0_4x4"),
        ("Q8_0", AVX2, None),
        ("Q4_0", I8MM, "q4_0_4x8"),
        ("Q4_0", DOTPROD, "q4_0_4x4"),
        ("Q4_0", repack_plan({"sve256", "i8mm", "dotprod"}), "q4_0_8x8"),
        ("Q4_1", I8MM, None),
    ],
)
def test_matmul_weight_layout_per_feature_set(type_name, plan, layout):
    assert repack_layout(_tensor("blk.3.attn_q.weight", [640, 1024], type_name), plan) == layout


def test_row_multiple_decides():
    # 4x8 / 4x4 layouts need ne[1] % 4, the 8-column ones ne[1] % 8
    assert repack_layout(_tensor("blk.0.ffn_up.weight", [512, 1020], "Q8_0"), I8MM) == "q8_0_4x8"
    assert repack_layout(_tensor("blk.0.ffn_up.weight", [512, 1020], "Q4_K"), I8MM) is None
    assert repack_layout(_tensor("blk.0.ffn_up.weight", [512, 1022], "Q8_0"), I8MM) is None


@pytest.mark.parametrize(
    "name, shape",
    [
        ("token_embd.weight", [640, 4096]),  # GET_ROWS
        ("per_layer_token_embd.weight", [640, 4096]),  # GET_ROWS (gemma3n)
        ("blk.2.ssm_conv1d.weight", [4, 4096]),  # SSM_CONV
        ("blk.2.attn_k_b.weight", [128, 512, 16]),  # a 3-D MUL_MAT weight: ggml_n_dims != 2
        ("blk.2.attn_q.bias", [640, 4096]),  # ADD
        ("blk.2.attn_norm.weight", [640]),  # 1-D
    ],
)
def test_weights_not_used_by_a_2d_matmul_stay_plain(name, shape):
    assert repack_layout(_tensor(name, shape, "Q8_0"), I8MM) is None


def test_expert_stacks_repack_as_mul_mat_id():
    experts = _tensor("blk.1.ffn_up_exps.weight", [512, 1024, 8], "Q4_0")
    assert repack_layout(experts, I8MM) == "q4_0_4x8"
    assert repack_layout(_tensor("blk.1.ffn_up_exps.weight", [512, 1024], "Q4_0"), I8MM) is None


def _tied_model(output: bool, embd_type: str = "Q8_0") -> _File:
    f = _File()
    f.add("token_embd.weight", [640, 4096], embd_type)
    for il in range(2):
        f.add(f"blk.{il}.attn_norm.weight", [640], "F32")
        f.add(f"blk.{il}.attn_q.weight", [640, 1024], "Q4_K")
        f.add(f"blk.{il}.ffn_down.weight", [1024, 640], "Q6_K")
    f.add("output_norm.weight", [640], "F32")
    if output:
        f.add("output.weight", [640, 4096], "Q6_K")
    return f


def test_tied_output_is_a_repacked_duplicate_of_token_embd():
    f = _tied_model(output=False)
    embd = f.tensors[0].n_bytes or 0
    w = estimate_weights(f.tensors, I8MM, "llama")
    matmuls = sum(t.n_bytes or 0 for t in f.tensors if "attn_q" in t.name or "ffn_down" in t.name)
    assert w.tied_output_bytes == embd
    assert w.repack_bytes == matmuls + embd
    attn_q, ffn_down = f.tensors[2].n_bytes or 0, f.tensors[3].n_bytes or 0
    assert w.repacked_types == {"q8_0_4x8": embd, "q4_K_8x8": 2 * attn_q, "q6_K_8x8": 2 * ffn_down}
    # the embedding itself stays plain: without mmap it is in the CPU buffer, its duplicate in CPU_REPACK
    assert w.weight_buffer_bytes(use_mmap=False, repack=True) == w.tensor_bytes - matmuls
    # no duplicate when the type does not repack on this CPU (x86: Q8_0), nor for an untied model
    assert estimate_weights(f.tensors, AVX2, "llama").tied_output_bytes == 0
    assert estimate_weights(_tied_model(output=True).tensors, I8MM, "llama").tied_output_bytes == 0
    # nor for an encoder, which has no output projection
    assert estimate_weights(f.tensors, I8MM, "bert").tied_output_bytes == 0
    # a Q4_0 embedding is duplicated on x86 too (AVX2 repacks Q4_0 when n_vocab % 8 == 0)
    q4 = _tied_model(output=False, embd_type="Q4_0")
    assert estimate_weights(q4.tensors, AVX2, "llama").tied_output_bytes == q4.tensors[0].n_bytes


def test_load_modes_keep_different_copies():
    f = _tied_model(output=True)  # output.weight (Q6_K) repacked, last in the file
    w = estimate_weights(f.tensors, I8MM, "llama", file_size=f.end + 4 * MIB)
    out = f.tensors[-1].n_bytes or 0
    # mmap: CPU_Mapped is the span of the plain tensors, so it ends before output.weight
    assert w.weight_buffer_bytes(use_mmap=True, repack=True) == f.tensors[-2].offset + 640 * 4
    # ... but the repacked tensors inside the span stay mapped next to their copies
    assert w.weight_buffer_bytes(use_mmap=True, repack=True) == w.tensor_bytes - out
    assert w.weight_buffer_bytes(use_mmap=True, repack=False) == f.tensors[-1].offset + out
    # no mmap: the CPU buffer holds exactly the plain tensors; no repack: everything, once
    assert w.weight_buffer_bytes(use_mmap=False, repack=True) == w.tensor_bytes - w.repack_bytes
    assert w.weight_buffer_bytes(use_mmap=False, repack=False) == w.tensor_bytes
    assert w.repack_buffer_bytes(False) == 0
    # loading with mmap populates the whole file while the copies are written
    assert w.load_peak_bytes(use_mmap=True, repack=True) == f.end + 4 * MIB + w.repack_bytes
    # without mmap, the largest repacked tensor passes through a read buffer of its own size first
    assert w.load_peak_bytes(use_mmap=False, repack=True) >= 2 * max(w.largest_repacked)
    assert w.load_peak_bytes(use_mmap=False, repack=False) == w.tensor_bytes


def test_predict_honours_repack_off(gemma_path):
    header = read_header(gemma_path)
    arch = arch_params(header.metadata)
    plan = read_device(DEVICES / "sd8gen2-xiaomi13pro").cpu.repack_plan()
    on = predict(header, arch, EngineSettings(n_ctx=2048, n_threads=1), plan).memory
    off = predict(header, arch, EngineSettings(n_ctx=2048, n_threads=1, repack=False), plan).memory
    none_on = predict(header, arch, EngineSettings(n_ctx=2048, n_threads=1, use_mmap=False), plan).memory
    assert off.repack_bytes == 0 and on.repack_bytes > 150 * MIB
    # mmap + repack keeps file pages and copies: the most; no mmap saves the plain copies of repacked tensors
    assert on.peak_rss_bytes > none_on.peak_rss_bytes > off.peak_rss_bytes
    assert on.peak_rss_bytes - off.peak_rss_bytes == pytest.approx(on.repack_bytes, rel=0.01)
    assert "--no-repack" in EngineSettings(n_ctx=512, n_threads=1, repack=False).llama_cpp_args()
    assert "--no-repack" not in EngineSettings(n_ctx=512, n_threads=1).llama_cpp_args()


# llama.cpp's logged CPU_REPACK on aarch64 (the lane, QEMU_CPU=max: i8mm; cortex-a76: dotprod only), and
# x86's (AVX2: no Q8_0 repacking, so no duplicate).
@pytest.mark.parametrize(
    "device, model, logged_mib, layouts",
    [
        ("sd8gen2-xiaomi13pro", "gemma", 193.38, {"q8_0_4x8", "q4_K_8x8", "q6_K_8x8"}),
        ("pixel6a-tensor-g1", "gemma", 193.38, {"q8_0_4x4", "q4_K_8x4", "q6_K_8x4"}),
        ("xperia10ii-sd665", "gemma", 0.0, set()),
        ("redmi-note8-termux32", "gemma", 0.0, set()),
        ("x86-laptop-i7-1165g7", "gemma", 12.66, {"q4_K_8x8"}),
        ("sd8gen2-xiaomi13pro", "smollm", 28.69, {"q8_0_4x8"}),
        ("pixel6a-tensor-g1", "smollm", 28.69, {"q8_0_4x4"}),
        ("x86-laptop-i7-1165g7", "smollm", 0.0, set()),
    ],
)
def test_real_headers_on_device_trees(device, model, logged_mib, layouts, gemma_path, smollm_path):
    header = read_header(gemma_path if model == "gemma" else smollm_path)
    plan = read_device(DEVICES / device).cpu.repack_plan()
    w = estimate_weights(header.tensors, plan, header.architecture, header.file_size)
    assert w.repack_bytes / MIB == pytest.approx(logged_mib, rel=0.005, abs=0.01)
    assert set(w.repacked_types) == layouts
    embd = next(t for t in header.tensors if t.name == "token_embd.weight")
    assert w.tied_output_bytes == (embd.n_bytes if any(k.startswith("q8_0") for k in layouts) else 0)


def test_sve_256_bit_vectors_change_q4_0_only():
    features = ["asimd", "asimddp", "i8mm", "sve", "sve2"]
    wide = summarize("arm64", features, sve_vector_bits=256).repack
    phone = summarize("arm64", features, sve_vector_bits=128).repack
    assert wide["Q4_0"] == "8x8" and phone["Q4_0"] == "4x8"
    assert {k: v for k, v in wide.items() if k != "Q4_0"} == {k: v for k, v in phone.items() if k != "Q4_0"}


def test_settings_replace_keeps_repack():
    assert replace(EngineSettings(n_ctx=256, n_threads=1, repack=False), n_ctx=512).repack is False


def test_untied_7b_header_matches_llama_cpp_on_aarch64(header_7b):
    """DeepSeek-R1-Distill-Qwen-7B Q4_K_M (the file's first 95 MB: its header), buffers llama.cpp logged on
    the lane with the file padded: CPU_Mapped 3997.67 (mmap + repack: output.weight, the last tensor, leaves
    the span), CPU 293.63 (no mmap: the Q4_K embedding only), CPU_REPACK 4166.82, CPU_Mapped 4460.45 (no
    repack)."""
    header = read_header(header_7b)
    w = estimate_weights(header.tensors, I8MM, header.architecture)
    assert w.tied_output_bytes == 0
    for predicted, logged in [
        (w.weight_buffer_bytes(use_mmap=True, repack=True), 3997.67),
        (w.weight_buffer_bytes(use_mmap=False, repack=True), 293.63),
        (w.repack_buffer_bytes(True), 4166.82),
        (w.weight_buffer_bytes(use_mmap=True, repack=False), 4460.45),
    ]:
        assert predicted / MIB == pytest.approx(logged, abs=0.01)
