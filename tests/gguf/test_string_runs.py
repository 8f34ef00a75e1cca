"""The vocabulary is stepped over in runs (gguf/header_bytes.py), yet the header read is the one a
string-by-string walk gives: the same values, spans, end and problems, with the same item numbers, on whole,
hostile and truncated arrays, across the window's edges."""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

import pytest
from synth import RawGGUF, pack_str

from edgepilot.gguf import gguf_header
from edgepilot.gguf.gguf_header import read_header
from edgepilot.gguf.header_bytes import RUN, SHORT, Window, step_runs

KEY = "tokenizer.ggml.tokens"


@pytest.fixture(autouse=True)
def skip_every_array(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gguf_header, "KEEP_ARRAY", 0)  # small arrays are stepped over too, not kept


def _walk_one_by_one(self: Any, n: int, key: str) -> None:
    """The parser's string-by-string walk before runs: the reference."""
    for i in range(n):
        self._need(8, f"item {i} of '{key}'")
        off = self.src.at(self.pos, 8)  # may move the window: read it afterwards
        (length,) = struct.unpack_from("<Q", self.src.win, off)
        self.pos += 8
        if length > (left := self.limit - self.pos):
            self.h.add(
                "bad-string",
                f"item {i} of '{key}': string length {length} exceeds the remaining {left} bytes",
            )
            raise gguf_header._Stop
        self.pos += length


def both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    fast = read_header(path)
    with monkeypatch.context() as m:
        m.setattr(gguf_header._Parser, "_skip_strings", _walk_one_by_one)
        slow = read_header(path)
    return fast, slow


def vocabulary(lengths: list[int], rng: random.Random) -> bytes:
    return b"".join(pack_str(bytes(rng.randrange(256) for _ in range(n))) for n in lengths)


def model(items: bytes, count: int, tail: bool = True) -> bytes:
    g = RawGGUF().kv_raw(pack_str(KEY) + struct.pack("<iiQ", 9, 8, count) + items)
    if tail:
        g.kv("general.architecture", 8, "llama").tensor("t", (32,), 0, 0)
        g.data = b"\1" * 128
    return g.build()


def lengths(rng: random.Random, n: int) -> list[int]:
    edges = [0, 1, SHORT - 1, SHORT, SHORT + 1, 255, 256, 300, 5000]
    return [rng.choice(edges) if rng.random() < 0.02 else rng.randrange(1, 16) for _ in range(n)]


@pytest.mark.parametrize("n", [1, RUN - 1, RUN, RUN + 1, 5 * RUN + 7, 10_000])
def test_a_whole_vocabulary_reads_as_one_by_one(tmp_path, monkeypatch, n):
    rng = random.Random(n)
    path = tmp_path / "m.gguf"
    path.write_bytes(model(vocabulary(lengths(rng, n), rng), n))
    stepped = []

    def counted(*args: Any) -> tuple[int, int]:
        stepped.append(step_runs(*args)[1])
        return step_runs(*args)

    monkeypatch.setattr(gguf_header, "step_runs", counted)
    fast, slow = both(path, monkeypatch)
    assert fast == slow and fast.complete and fast.metadata[KEY].count == n
    assert sum(stepped) > n // 2 if n >= 10 * RUN else sum(stepped) % RUN == 0  # the runs did the stepping
    assert fast.metadata[KEY].span == slow.metadata[KEY].span


def test_a_vocabulary_across_window_edges(tmp_path, monkeypatch):
    monkeypatch.setattr(Window, "CHUNK", 4096)  # many edges, each at a different place within a run
    rng = random.Random(7)
    n = 20_000
    path = tmp_path / "m.gguf"
    path.write_bytes(model(vocabulary(lengths(rng, n), rng), n))
    fast, slow = both(path, monkeypatch)
    assert fast == slow and fast.complete


@pytest.mark.parametrize("declared", [SHORT - 1 + (1 << 40), 1 << 63, 10**9, 3 << 56])
@pytest.mark.parametrize("at", [0, 5, RUN - 1, RUN, 3 * RUN + 2, 999])
def test_a_hostile_length_in_a_run_is_the_same_problem_at_the_same_item(tmp_path, monkeypatch, declared, at):
    rng = random.Random(at)
    sizes = [rng.randrange(1, 12) for _ in range(1000)]
    items = vocabulary(sizes[:at], rng) + struct.pack("<Q", declared) + vocabulary(sizes[at + 1 :], rng)
    path = tmp_path / "m.gguf"
    path.write_bytes(model(items, 1000))
    fast, slow = both(path, monkeypatch)
    assert fast == slow and not fast.complete
    assert [p.code for p in fast.problems] == ["bad-string"]
    assert f"item {at} of '{KEY}'" in fast.problems[0].message


def test_a_vocabulary_cut_anywhere_gives_the_same_problem(tmp_path, monkeypatch):
    monkeypatch.setattr(Window, "CHUNK", 1024)
    rng = random.Random(3)
    n = 600
    data = model(vocabulary(lengths(rng, n), rng), n, tail=False)
    path = tmp_path / "m.gguf"
    for cut in range(40, len(data), 13):
        path.write_bytes(data[:cut])
        fast, slow = both(path, monkeypatch)
        assert fast == slow and fast.problems, cut


def test_a_count_beyond_the_strings_is_the_same_problem(tmp_path, monkeypatch):
    rng = random.Random(5)
    items = vocabulary([rng.randrange(1, 12) for _ in range(3 * RUN)], rng)
    path = tmp_path / "m.gguf"
    path.write_bytes(model(items, 3 * RUN + 40))  # the KV pair and tensor info after it read as strings
    fast, slow = both(path, monkeypatch)
    assert fast == slow and not fast.complete
