"""GGUF validation: valid files pass, every kind of damage gets its own clear verdict, nothing raises."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import time
import tracemalloc
from pathlib import Path

import pytest
from synth import MiB, RawGGUF, TensorSpec, f32_tensor_file, pack_str, truncate, write_model, zero_tail

from edgepilot.errors import UserError
from edgepilot.gguf.gguf_header import read_header
from edgepilot.gguf.gguf_validate import Validation, parse_sha256_file, validate_gguf
from edgepilot.jsonable import dumps


def codes(v: Validation) -> set[str]:
    return {p.code for p in v.problems}


def write(tmp_path: Path, data: bytes, name: str = "m.gguf") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


# --- valid files ---


def test_every_synthetic_arch_is_valid(synth_models):
    for name, path in synth_models.items():
        v = validate_gguf(path)
        assert v.ok, (name, v.problems)
        assert v.problems == []
        assert v.version == 3 and v.alignment == 32
        assert v.expected_file_size == v.file_size == path.stat().st_size
        assert v.data_offset is not None and v.data_offset % 32 == 0
        json.loads(dumps(v))  # serializable for --json


def test_custom_alignment_is_honoured(tmp_path):
    p = write_model(
        tmp_path / "a.gguf",
        {"arch": "llama", "block_count": 2, "embedding_length": 64, "context_length": 128},
        alignment=64,
    )
    v = validate_gguf(p)
    assert v.ok and v.alignment == 64 and v.data_offset % 64 == 0


def test_header_metadata_is_parsed_and_big_arrays_are_summarized(synth_models):
    h = read_header(synth_models["gemma3"])
    assert h.complete and h.architecture == "gemma3"
    assert h.metadata["gemma3.attention.sliding_window"] == 512
    assert h.metadata["tokenizer.ggml.tokens"][:2] == ["tok0", "tok1"]
    assert [t.type_name for t in h.tensors] == ["Q8_0", "F32", "Q4_K", "F16", "F32"]
    assert h.tensors[2].n_bytes == 4 * 144  # 4 rows of one Q4_K block


def test_all_value_types_including_nested_arrays(tmp_path):
    g = RawGGUF().kv("general.architecture", 8, "llama")
    for vtype, value in [
        (0, 255),
        (1, -1),
        (2, 65535),
        (3, -2),
        (4, 7),
        (5, -7),
        (6, 1.5),
        (7, 1),
        (10, 2**63),
        (11, -(2**62)),
        (12, 2.25),
    ]:
        g.kv(f"k.t{vtype}", vtype, value)
    g.kv("k.arr", 9, [1, 2, 3], item_type=4)
    g.kv("k.strs", 9, ["a", "bc"], item_type=8)
    g.kv("k.nested", 9, [(4, [1, 2]), (8, ["x"])], item_type=9)
    h = read_header(write(tmp_path, g.build()))
    assert h.complete
    assert h.metadata["k.t7"] is True and h.metadata["k.t12"] == 2.25 and h.metadata["k.t10"] == 2**63
    assert h.metadata["k.arr"] == [1, 2, 3] and h.metadata["k.strs"] == ["a", "bc"]
    assert h.metadata["k.nested"] == [[1, 2], ["x"]]
    v = validate_gguf(h.path, header=h)
    assert codes(v) == {"nested-array"} and not v.ok  # llama.cpp's reader rejects arrays of arrays


# "fast" is measured in this thread's CPU time (time.thread_time): a busy machine stretches the wall-clock
# time of a linear check, never its CPU time


def test_real_smollm_is_valid_and_fast(real_smollm):
    t0 = time.thread_time()
    v = validate_gguf(real_smollm)
    assert v.ok, v.problems
    assert (v.architecture, v.tensor_count, v.file_size) == ("llama", 272, 98362432)
    assert time.thread_time() - t0 < 1.0 and v.elapsed_s > 0


def test_real_gemma_is_valid_and_fast(real_gemma):
    t0 = time.thread_time()
    v = validate_gguf(real_gemma)
    assert v.ok, v.problems
    assert v.architecture == "gemma3" and v.tensor_count == 236
    assert time.thread_time() - t0 < 1.0  # 262k-token vocabulary in the header


# --- header damage ---


@pytest.mark.parametrize(
    ("data", "code", "words"),
    [
        (b"", "bad-magic", "failed to read magic"),
        (b"GG", "bad-magic", "failed to read magic"),
        (b"PK\x03\x04" + b"\0" * 60, "bad-magic", "invalid magic characters"),
        (b"GGUF" + struct.pack("<I", 1) + b"\0" * 16, "bad-version", "bad GGUF version: 1"),
        (b"GGUF" + struct.pack("<I", 4) + b"\0" * 16, "bad-version", "bad GGUF version: 4"),
        (b"GGUF" + struct.pack(">I", 3) + b"\0" * 16, "bad-version", "byte order"),
        (b"GGUF" + struct.pack("<I", 3) + b"\0" * 4, "truncated-header", "truncated"),
    ],
)
def test_magic_and_version(tmp_path, data, code, words):
    v = validate_gguf(write(tmp_path, data))
    assert not v.ok
    assert code in codes(v)
    assert words in " ".join(p.message for p in v.problems)


def test_implausible_counts_are_rejected_before_looping(tmp_path):
    g = RawGGUF(n_kv=2**60, n_tensors=3)
    t0 = time.thread_time()
    v = validate_gguf(write(tmp_path, g.build() + b"\0" * 100))
    assert "bad-count" in codes(v) and time.thread_time() - t0 < 0.5


def test_huge_string_length(tmp_path):
    for declared in (2**40, 2**31, 10_000):  # beyond llama.cpp's 1 GiB cap, and beyond the file
        g = RawGGUF().kv_raw(
            pack_str("general.name", declared_len=len("general.name"))
            + struct.pack("<i", 8)
            + struct.pack("<Q", declared)
            + b"abc"
        )
        v = validate_gguf(write(tmp_path, g.build()))
        assert "bad-string" in codes(v), declared
        assert not v.ok


def test_huge_key_length(tmp_path):
    g = RawGGUF().kv_raw(struct.pack("<Q", 2**62) + b"x" * 32)
    v = validate_gguf(write(tmp_path, g.build()))
    assert codes(v) == {"bad-string"}


@pytest.mark.parametrize("count", [2**62, 2**30 + 1, 5_000_000])
def test_huge_array_count_never_allocates(tmp_path, count):
    for item_type in (4, 8, 9):
        g = RawGGUF().kv_raw(
            pack_str("tokenizer.ggml.tokens") + struct.pack("<iiQ", 9, item_type, count) + b"\x01" * 4096
        )
        path = write(tmp_path, g.build())
        tracemalloc.start()
        t0 = time.thread_time()
        v = validate_gguf(path)
        elapsed = time.thread_time() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert "bad-array" in codes(v), (count, item_type, v.problems)
        assert elapsed < 0.5 and peak < 4 * MiB


def test_memory_kept_for_a_header_is_capped(synth_models, monkeypatch):
    from edgepilot.gguf import gguf_header

    monkeypatch.setattr(gguf_header, "KEEP_TOTAL", 2048)  # a real header fits in far less than the default
    v = validate_gguf(synth_models["gemma3"])
    assert codes(v) == {"header-too-large"} and not v.ok


def test_deeply_nested_arrays_stop(tmp_path):
    blob = pack_str("k") + struct.pack("<i", 9)
    for _ in range(50):
        blob += struct.pack("<iQ", 9, 1)
    v = validate_gguf(write(tmp_path, RawGGUF().kv_raw(blob + b"\0" * 64).build()))
    assert {"nested-array", "bad-kv"} <= codes(v)


def test_invalid_value_type_duplicate_and_empty_keys(tmp_path):
    g = RawGGUF().kv("a", 4, 1).kv("a", 4, 2).kv("", 4, 3)
    v = validate_gguf(write(tmp_path, g.build()))
    msgs = " ".join(p.message for p in v.problems)
    assert "duplicate key 'a'" in msgs and "key 2 is empty" in msgs
    g = RawGGUF().kv_raw(pack_str("x") + struct.pack("<i", 13) + b"\0" * 8)
    assert "invalid GGUF type 13" in validate_gguf(write(tmp_path, g.build())).problems[0].message


def test_bad_alignment(tmp_path):
    for vtype, value in [(4, 48), (4, 0), (5, 32)]:
        g = RawGGUF().kv("general.alignment", vtype, value)
        assert "bad-alignment" in codes(validate_gguf(write(tmp_path, g.build()))), (vtype, value)


def test_bad_tensor_infos(tmp_path):
    g = RawGGUF().kv("general.architecture", 8, "llama")
    g.tensor("x" * 70, (32,), 0, 0)
    g.tensor("dup", (32,), 0, 128)
    g.tensor("dup", (32,), 0, 256)
    g.tensor("neg", (-1,), 0, 384)
    g.tensor("ragged", (33,), 8, 384)  # Q8_0 rows must be multiples of 32
    g.tensor("unknown", (32,), 4, 384)  # type 4 (old Q4_2) was removed from ggml
    g.data = b"\1" * 1024
    v = validate_gguf(write(tmp_path, g.build()))
    msgs = " ".join(p.message for p in v.problems)
    for words in [
        "too long",
        "duplicate tensor name 'dup'",
        "invalid number of elements",
        "not a multiple of block",
        "ggml type 4",
    ]:
        assert words in msgs, words
    g = RawGGUF().tensor("five", (1, 1, 1, 1, 1), 0, 0)
    assert (
        "invalid number of dimensions: 5 > 4" in validate_gguf(write(tmp_path, g.build())).problems[0].message
    )


# --- data section damage ---


def test_offsets_in_order_pass(tmp_path):
    assert validate_gguf(write(tmp_path, f32_tensor_file([0, 256, 512]))).ok


def test_out_of_order_and_gapped_offsets(tmp_path):
    v = validate_gguf(write(tmp_path, f32_tensor_file([0, 512, 256])))
    assert "tensor-offset-mismatch" in codes(v)
    assert "tensor 't1' has offset 512, expected 256" in v.problems[0].message
    v = validate_gguf(write(tmp_path, f32_tensor_file([0, 128, 256])))  # t1 overlaps t0 (256 bytes)
    assert "overlaps" in v.problems[0].message


def test_tensor_offset_outside_file(tmp_path):
    v = validate_gguf(write(tmp_path, f32_tensor_file([0, 256, 2**40], data_len=768)))
    assert {"tensor-offset-mismatch", "tensor-out-of-bounds"} <= codes(v)
    assert any(
        "tensor 't2' data is not within the file bounds, model is corrupted or incomplete" in p.message
        for p in v.problems
    )


def test_truncated_in_data_section(synth_models, tmp_path):
    src = synth_models["qwen2"]
    size = src.stat().st_size
    h = read_header(src)
    for cut in (size - 1, size - 300, h.data_offset + 10, h.data_offset):
        p = tmp_path / "cut.gguf"
        shutil.copy(src, p)
        truncate(p, cut)
        v = validate_gguf(p)
        assert not v.ok and {"truncated", "tensor-out-of-bounds"} <= codes(v), cut


def test_truncated_at_every_point_of_the_header(synth_models, tmp_path):
    data = synth_models["deepseek2"].read_bytes()
    data_offset = read_header(synth_models["deepseek2"]).data_offset
    p = tmp_path / "t.gguf"
    for cut in range(0, data_offset + 1, 7):
        p.write_bytes(data[:cut])
        v = validate_gguf(p)
        assert not v.ok, cut
        assert codes(v) & {
            "bad-magic",
            "truncated-header",
            "bad-string",
            "bad-array",
            "bad-count",
            "truncated",
            "tensor-out-of-bounds",
        }, (cut, v.problems)


def test_trailing_bytes_are_a_warning(synth_models, tmp_path):
    p = tmp_path / "t.gguf"
    p.write_bytes(synth_models["qwen2"].read_bytes() + b"junk" * 100)
    v = validate_gguf(p)
    assert v.ok and codes(v) == {"trailing-data"} and v.problems[0].severity == "warning"


def big_model(path: Path) -> Path:
    return write_model(
        path,
        {"arch": "llama", "block_count": 1, "embedding_length": 64, "context_length": 64},
        tensors=[TensorSpec("a.weight", (1024, 1024), "F16"), TensorSpec("b.weight", (512, 512), "F32")],
    )


def test_zero_filled_tail(tmp_path):
    p = big_model(tmp_path / "z.gguf")
    assert validate_gguf(p).ok
    zero_tail(p, int(1.5 * MiB))
    v = validate_gguf(p)
    assert codes(v) == {"zero-tail"} and not v.ok
    assert 1 * MiB <= v.zero_tail_bytes <= 3 * MiB
    assert "interrupted download" in v.problems[0].message


def test_small_zero_runs_are_not_flagged(tmp_path):
    p = big_model(tmp_path / "z.gguf")
    zero_tail(p, 4096)  # less than the 1 MiB window
    assert validate_gguf(p).ok


def test_multi_gb_file_reads_only_header_and_tail(tmp_path):
    """A sparse 6 GiB file: the right size, but never written — the classic broken download."""
    g = RawGGUF().kv("general.architecture", 8, "llama")
    for i in range(3):
        g.tensor(f"blk.{i}.w", (1 << 15, 1 << 15), 1, i * (2 << 30))  # 2 GiB F16 each
    p = write(tmp_path, g.build())
    truncate(p, len(g.build()) + 3 * (2 << 30))
    t0 = time.thread_time()
    v = validate_gguf(p)
    assert time.thread_time() - t0 < 1.0
    assert codes(v) == {"zero-tail"}
    assert v.zero_tail_bytes > 5 * (1 << 30)


# --- sha256 ---


def test_sha256_argument(synth_models):
    p = synth_models["phi3"]
    digest = hashlib.sha256(p.read_bytes()).hexdigest()
    v = validate_gguf(p, sha256=digest.upper())
    assert v.ok and v.sha256 == digest and v.sha256_source == "argument"
    v = validate_gguf(p, sha256="0" * 64)
    assert codes(v) == {"sha256-mismatch"} and not v.ok


def test_sha256_argument_must_be_hex():
    with pytest.raises(UserError, match="64 hexadecimal"):
        validate_gguf("whatever.gguf", sha256="abc")


@pytest.mark.parametrize("sidecar_name", ["m.gguf.sha256", "m.sha256"])
def test_sha256_sidecar(synth_models, tmp_path, sidecar_name):
    p = tmp_path / "m.gguf"
    shutil.copy(synth_models["mamba"], p)
    digest = hashlib.sha256(p.read_bytes()).hexdigest()
    side = tmp_path / sidecar_name
    side.write_text(f"{'1' * 64}  other.gguf\n{digest} *m.gguf\n")
    v = validate_gguf(p)
    assert v.ok and v.sha256 == digest and v.sha256_source == str(side)
    side.write_text(f"{'f' * 64}  m.gguf\n")
    assert codes(validate_gguf(p)) == {"sha256-mismatch"}
    assert validate_gguf(p, sidecar=False).ok  # the planner's fast path skips hashing
    side.write_text("not a checksum\n")
    v = validate_gguf(p)
    assert v.ok and codes(v) == {"sha256-sidecar-unreadable"}


def test_parse_sha256_file():
    d = "a" * 64
    assert parse_sha256_file(f"{d}\n", "x.gguf") == d
    assert parse_sha256_file(f"{d}  dir/x.gguf\n{'b' * 64}  y.gguf", "x.gguf") == d
    assert parse_sha256_file(f"{d}  y.gguf\n{'b' * 64}  z.gguf", "x.gguf") is None


# --- paths ---


def test_unusable_paths_raise_user_error(tmp_path):
    with pytest.raises(UserError, match="not found"):
        validate_gguf(tmp_path / "missing.gguf")
    with pytest.raises(UserError, match="directory"):
        validate_gguf(tmp_path)


def test_unreadable_file_raises_user_error(synth_models, open_tmp, unprivileged):
    p = open_tmp / "locked.gguf"
    shutil.copy(synth_models["qwen2"], p)
    p.chmod(0)
    with pytest.raises(UserError, match="permission"):
        unprivileged(validate_gguf, p)
