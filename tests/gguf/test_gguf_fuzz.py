"""Fuzz the validator: mutated or truncated GGUFs always get a verdict, quickly, without an exception."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from synth import ARCHS, RawGGUF, write_model

from edgepilot.gguf.gguf_validate import validate_gguf

hypothesis = pytest.importorskip("hypothesis")
st = pytest.importorskip("hypothesis.strategies")
given, settings, HealthCheck = hypothesis.given, hypothesis.settings, hypothesis.HealthCheck

_WORK = Path(tempfile.mkdtemp(prefix="edgepilot-fuzz-"))  # hypothesis examples cannot use tmp_path
atexit.register(shutil.rmtree, _WORK, ignore_errors=True)


def _seed_files() -> list[bytes]:
    """Small valid files that exercise every parser path: all value types, string arrays, tensors."""
    out = [write_model(_WORK / f"{n}.gguf", ARCHS[n]).read_bytes() for n in ("gemma3", "deepseek2", "mamba")]
    g = RawGGUF().kv("general.architecture", 8, "llama")
    for vtype, value in [
        (0, 1),
        (1, -1),
        (2, 2),
        (3, -2),
        (5, -5),
        (6, 0.5),
        (7, 1),
        (10, 3),
        (11, -3),
        (12, 1.0),
    ]:
        g.kv(f"k{vtype}", vtype, value)
    g.kv("general.alignment", 4, 32).kv("strs", 9, ["ab", "c", ""], item_type=8).kv(
        "ints", 9, [1, 2], item_type=5
    )
    g.tensor("a", (32,), 0, 0).tensor("b", (64, 2), 8, 128)
    g.data = bytes(range(1, 129)) + bytes(range(1, 137))
    out.append(g.build())
    return out


SEEDS = _seed_files()


def _check(data: bytes) -> None:
    path = _WORK / "fuzz.gguf"
    path.write_bytes(data)
    t0 = time.thread_time()  # CPU time: a busy machine does not stretch it
    v = validate_gguf(path)  # must not raise
    assert time.thread_time() - t0 < 2.0
    assert isinstance(v.ok, bool)
    assert v.ok or v.problems, "a failed verdict must say why"
    assert all(p.code and p.message for p in v.problems)
    if data in SEEDS:
        assert v.ok


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=8),
)
def test_byte_mutations_always_get_a_verdict(seed, edits):
    data = bytearray(SEEDS[seed])
    for where, byte in edits:
        data[int(where * len(data))] = byte
    _check(bytes(data))


@settings(max_examples=200, deadline=None, database=None)
@given(seed=st.sampled_from(range(len(SEEDS))), where=st.floats(0, 1))
def test_truncations_always_get_a_verdict(seed, where):
    data = SEEDS[seed]
    _check(data[: int(where * len(data))])


@settings(max_examples=200, deadline=None, database=None)
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    where=st.floats(0, 1),
    blob=st.binary(min_size=1, max_size=64),
    big=st.sampled_from([b"", b"\xff" * 8, b"\x00\x00\x00\x40\x00\x00\x00\x00", b"\x09\x00\x00\x00"]),
)
def test_splices_always_get_a_verdict(seed, where, blob, big):
    """Insert random bytes (often a huge length or an array type) into the header."""
    data = SEEDS[seed]
    cut = int(where * len(data))
    _check(data[:cut] + big + blob + data[cut:])
