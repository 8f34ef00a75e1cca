"""The kept CPU checks (cpu-checks.json) are input: a damaged or hostile file is never a verdict, a hang
or a traceback, and the writer stays under its reader's cap."""

from __future__ import annotations

import json
import os

import pytest

from edgepilot.engine import cpu_check_store as store

GOOD = {"outcome": "crashed", "mode": "full", "seconds": 1.5, "detail": "SIGILL", "signal": "SIGILL"}


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path))
    return tmp_path


def _write(data, checks) -> None:
    (data / store.CACHE_NAME).write_text(json.dumps({"format": store.FORMAT, "checks": checks}))


def test_a_good_entry_reads_back(data):
    _write(data, {"k": {"full": GOOD}})
    assert store.load("k")["full"]["outcome"] == "crashed"


@pytest.mark.parametrize(
    "bad",
    [
        {**GOOD, "seconds": True},
        {**GOOD, "seconds": float("nan")},
        {**GOOD, "seconds": -1},
        {**GOOD, "seconds": "1"},
        {**GOOD, "outcome": "hung"},  # a timeout is never kept as a verdict
        {**GOOD, "outcome": ["crashed"]},
        {**GOOD, "exit_code": False},
        {**GOOD, "detail": 7},
        {**GOOD, "mode": "turbo"},
        {**GOOD, "evidence": "not a list"},
        "crashed",
        None,
    ],
)
def test_a_damaged_entry_is_no_verdict(data, bad):
    text = json.dumps({"format": store.FORMAT, "checks": {"k": {"full": bad}}}, allow_nan=True)
    (data / store.CACHE_NAME).write_text(text)
    assert store.load("k") is None


def test_a_fifo_a_directory_and_a_huge_file_are_no_verdict(data):
    path = data / store.CACHE_NAME
    os.mkfifo(path)  # open() would block until a writer came
    assert store.load("k") is None
    path.unlink()
    path.mkdir()
    assert store.load("k") is None
    path.rmdir()
    path.write_text(" " * (store.CACHE_FILE + 1))
    assert store.load("k") is None
    path.write_text("[" * 100000 + "]" * 100000)
    assert store.load("k") is None


def test_the_writer_stays_under_the_readers_cap(data):
    big = {**GOOD, "evidence": ["x" * store.MAX_TEXT] * store.MAX_LINES, "detail": "d" * store.MAX_TEXT}
    for n in range(store.MAX_ENTRIES + 10):
        assert store.store(f"key{n}", {"full": big}) is None
    assert (data / store.CACHE_NAME).stat().st_size <= store.CACHE_FILE
    assert store.load(f"key{store.MAX_ENTRIES + 9}") is not None  # the newest is kept
