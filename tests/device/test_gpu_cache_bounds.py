"""The GPU check cache (engine/gpu_cache.py) as its own reader sees it: the writer keeps within the reader's
cap, so it never forgets its failed checks (their drivers stay out of GPU runs), dropping the oldest passed
checks first; and the file is read as hostile input: typed fields (a bool is not a number, NaN is not a
duration), a depth limit."""

from __future__ import annotations

import json

import pytest

from edgepilot.engine import gpu_cache, gpu_check
from edgepilot.engine.gpu_outcome import from_entry


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path / "data"))


def entry(n: int, failed: bool) -> dict:
    """A check as gpu_check keeps it, with as much evidence and detail as a real failed check prints."""
    return {
        "scope": "s" * 24,
        "device": "Vulkan0",
        "description": f"GPU {n}",
        "ok": not failed,
        "outcome": "crashed" if failed else "ok",
        "seconds": 1.5,
        "detail": "the Vulkan driver crashed during the check: SIGSEGV" if failed else "ok",
        "signal": "SIGSEGV" if failed else None,
        "exit_code": -11 if failed else 0,
        "facts": {"device": {"index": 0, "name": "Mali", "uma": True, "line": "x" * 1000}},
        "evidence": [f"line {i} " + "y" * 990 for i in range(12)],
        "tool": "/usr/bin/llama-bench",
        "checked_at": f"2026-12-06T05:{n // 60:02d}:{n % 60:02d}+0000",
        "attempts": 1,
        "cpu_seconds": 1.0,
    }


def test_the_writer_stays_within_its_readers_cap_and_keeps_every_failed_check():
    failed = {f"f{n:03d}": entry(n, True) for n in range(0, 100, 10)}
    for n in range(100):
        key = f"f{n:03d}" if n % 10 == 0 else f"k{n:03d}"
        assert gpu_cache.store(key, entry(n, n % 10 == 0)) is None
    assert gpu_cache.cache_path().stat().st_size <= gpu_cache.CACHE_FILE
    kept = gpu_cache.load()
    assert set(failed) <= set(kept), "a failed check was forgotten"
    assert len(kept) <= gpu_cache.MAX_ENTRIES and len(kept) > len(failed)
    passed = sorted(k for k in kept if k.startswith("k"))
    assert passed[-1] == "k099" and "k001" not in passed, "not the oldest passed checks dropped first"
    assert {c.outcome for c in gpu_check.cached_checks()} == {"ok", "crashed"}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("seconds", True),  # a bool is not a number
        ("seconds", float("nan")),
        ("seconds", -3),
        ("ok", "yes"),
        ("ok", True),  # says ok, outcome says crashed
        ("outcome", "exploded"),
        ("device", 7),
        ("exit_code", True),
    ],
)
def test_a_field_of_the_wrong_type_or_range_is_no_check(field, value):
    bad = {**entry(1, True), field: value}
    got = from_entry(json.loads(json.dumps(bad)))
    if field == "exit_code":
        assert got is not None and got.exit_code is None
    else:
        assert got is None


def test_nested_facts_keep_only_scalars_and_sizes():
    hostile = {
        **entry(1, True),
        "facts": {
            "device": {"uma": True, "deep": {"a": [1]}, "n": -1},
            "buffers": {"Vulkan0 model": 10, "x": "big", "y": True},
        },
    }
    got = from_entry(hostile)
    assert got.facts == {"device": {"uma": True}, "buffers": {"Vulkan0 model": 10}}


def _write(text: str) -> None:
    path = gpu_cache.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_file_too_deep_or_of_another_format_is_not_read(capsys):
    deep = {"format": 1, "checks": {"k": {**entry(1, True), "facts": {"a": {"b": {"c": {"d": {"e": {}}}}}}}}}
    _write(json.dumps(deep))
    assert gpu_cache.load() == {}
    _write(json.dumps({"format": True, "checks": {"k": entry(1, True)}}))  # True == 1 in Python
    assert gpu_cache.load() == {}
    _write(json.dumps({"format": 1, "checks": {"k": {**entry(1, True), "scope": ["s"]}}}))
    assert gpu_cache.load() == {}
    assert "GPU check cache" in capsys.readouterr().err
