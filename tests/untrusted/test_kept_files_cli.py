"""The files edgepilot keeps, damaged or hostile, through the commands a user types: NaN, Infinity,
strings and booleans in a profile, the bandwidth figure, the bench history or a calibration, and a FIFO or a
directory in their place, give a plan, a table or one note naming the file, never a traceback and never a
hang (before: tracebacks in fit, probe, `tune --show`, `bench --history` and `doctor --model`; a FIFO hung
fit; a bandwidth figure of 1e-3 B/s printed "2023410382333 % of limit")."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from keptkit import in_place

NOTE = "edgepilot: note:"


def edgepilot(data: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EDGEPILOT_DATA_DIR": str(data)}
    if path is not None:  # llama.cpp's programs from PATH only
        env.update(PATH=path, EDGEPILOT_TOOLS_DIR=str(data / "no-tools"))
    done = subprocess.run(
        [sys.executable, "-m", "edgepilot", *args],
        capture_output=True,
        text=True,
        timeout=120,  # a FIFO read would block for good: the timeout fails the test
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def strict_json(text: str):
    """JSON as the standard has it: NaN and Infinity are no JSON."""
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in the JSON output"))


def notes(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(NOTE)]


# -- a tuned profile --------------------------------------------------------------------------------


def _profile_path(data: Path, model: Path) -> Path:
    shown = edgepilot(data, "tune", str(model), "--show", "--json")
    assert shown.returncode == 0, shown.stderr
    path = Path(strict_json(shown.stdout)["path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


GOOD_PROFILE = {
    "version": 1, "device_fingerprint": "x", "device": "d", "model_key": "k", "model_name": "m",
    "model_size": 1, "n_threads": 2, "n_threads_batch": 2, "cpus": [0], "n_ubatch": 512, "flash_attn": False,
    "gen_tps": 10.0, "prompt_tps": 100.0, "created": "2026-01-01",
}  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gen_tps", "NaN"),
        ("prompt_tps", '"fast"'),
        ("sustained_tps", "Infinity"),
        ("n_gpu_layers", "true"),
        ("n_threads", "true"),
        ("cpus", '["0"]'),
        ("flash_attn", "1"),
        ("n_ubatch", "1e400"),
    ],  # fmt: skip
)
def test_a_hostile_profile_is_left_out_with_one_note(tmp_path, gemma_path, field, value):
    path = _profile_path(tmp_path, gemma_path)
    text = json.dumps(GOOD_PROFILE)[:-1] + f', "{field}": {value}}}'
    path.write_text(text)
    for args in (["tune", str(gemma_path), "--show"], ["tune", str(gemma_path), "--show", "--json"]):
        done = edgepilot(tmp_path, *args)
        assert done.returncode == 0, done.stderr
        (note,) = notes(done.stderr)
        assert str(path) in note and field in note, note
    if "--json" in args:
        assert strict_json(done.stdout)["profile"] is None
    fit = edgepilot(tmp_path, "fit", str(gemma_path), "--json")
    assert fit.returncode == 0 and strict_json(fit.stdout)["fits"] is True, fit.stderr
    assert len(notes(fit.stderr)) == 1


def test_a_fifo_in_place_of_a_profile_never_hangs(tmp_path, gemma_path):
    path = _profile_path(tmp_path, gemma_path)
    os.mkfifo(path)
    fit = edgepilot(tmp_path, "fit", str(gemma_path), "--json")
    assert fit.returncode == 0 and strict_json(fit.stdout)["fits"] is True, fit.stderr
    assert any("FIFO" in n and str(path) in n for n in notes(fit.stderr)), fit.stderr
    shown = edgepilot(tmp_path, "tune", str(gemma_path), "--show", "--json")
    assert shown.returncode == 0 and strict_json(shown.stdout)["profile"] is None


# -- the memory bandwidth figure ----------------------------------------------------------------------


def _bandwidth(data: Path, **changes) -> Path:
    """A real measurement kept by probe --bandwidth, then changed."""
    done = edgepilot(data, "probe", "--bandwidth", "--json")
    assert done.returncode == 0, done.stderr
    path = data / "memory-bandwidth.json"
    kept = json.loads(path.read_text())
    (entry,) = kept["devices"].values()
    entry.update(changes)
    path.write_text(json.dumps(kept))
    return path


@pytest.mark.parametrize(
    "changes",
    [
        {"bytes_per_s": 1e-3},
        {"bytes_per_s": float("nan")},
        {"bytes_per_s": "fast"},
        {"bytes_per_s": 1e30},
        {"threads": True},
        {"threads": -1},
        {"buffer_bytes": "64"},
        {"by_threads": {"1": float("inf")}},
        {"by_threads": {"²": 1e10}},
        {"seconds": None},
    ],  # fmt: skip
    ids=repr,
)
def test_an_implausible_bandwidth_figure_is_not_shown(tmp_path, changes):
    path = _bandwidth(tmp_path, **changes)
    done = edgepilot(tmp_path, "probe", "--json")
    assert done.returncode == 0, done.stderr
    assert strict_json(done.stdout)["memory_bandwidth"]["bytes_per_s"] is None
    (note,) = notes(done.stderr)
    assert str(path) in note and next(iter(changes)) in note, note
    table = edgepilot(tmp_path, "probe")
    assert table.returncode == 0 and "% of limit" not in table.stdout


@pytest.mark.parametrize("kind", ["fifo", "directory", "huge", "deep"])
def test_no_bandwidth_file_a_fifo_or_a_damaged_one_stops_probe(tmp_path, kind):
    in_place(tmp_path / "memory-bandwidth.json", kind)
    done = edgepilot(tmp_path, "probe", "--json")
    assert done.returncode == 0, done.stderr
    assert strict_json(done.stdout)["memory_bandwidth"]["bytes_per_s"] is None


# -- the bench history -------------------------------------------------------------------------------


def _history(data: Path, rows: list[tuple], device: str = "none") -> Path:
    from edgepilot.bench.store import SCHEMA, SCHEMA_VERSION
    from edgepilot.tuned.identity import device_id

    path = data / "bench.sqlite"
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    con.execute(
        "INSERT INTO runs (id, started, kind, device_fp, model_key, model_name)"
        " VALUES (1, '2026', 'bench', ?, ?, 'gemma')",
        (device_id().fingerprint, MODEL_KEY[0]),
    )
    for avg, threads in rows:
        con.execute(
            "INSERT INTO results (run_id, test, n_gen, n_threads, n_ubatch, flash_attn, avg_ts, stddev_ts,"
            " samples_ts, device, n_gpu_layers) VALUES (1, 'tg32', 32, ?, 512, 0, ?, 0.5, '[]', ?, 99)",
            (threads, avg, device),
        )
    con.commit()
    con.close()
    return path


MODEL_KEY = [""]


@pytest.fixture
def model_key(gemma_path):
    from edgepilot.tuned.identity import model_id

    MODEL_KEY[0] = model_id(gemma_path).key
    return MODEL_KEY[0]


HOSTILE_ROWS = [(float("nan"), 2), ("fast", 2), (float("inf"), 2), (12.5, "two"), (-3.0, 2), (12.5, 2)]


def test_bench_history_leaves_out_hostile_rows(tmp_path, model_key):
    path = _history(tmp_path, HOSTILE_ROWS)
    for args in (["bench", "--history"], ["bench", "--history", "--json"]):
        done = edgepilot(tmp_path, *args)
        assert done.returncode == 0, done.stderr
        (note,) = notes(done.stderr)
        assert str(path) in note and "avg_ts" in note, note
    entries = strict_json(done.stdout)["entries"]
    assert [e["avg_ts"] for e in entries] == [12.5]


def test_doctor_model_reads_a_hostile_gpu_history(tmp_path, gemma_path, model_key):
    _history(tmp_path, HOSTILE_ROWS, device="Vulkan0")
    done = edgepilot(tmp_path, "doctor", "--model", str(gemma_path), "--json")
    assert done.returncode in (0, 1), done.stderr
    strict_json(done.stdout)


@pytest.mark.parametrize("kind", ["fifo", "directory", "garbage"])
def test_something_else_in_place_of_the_history_is_one_line(tmp_path, kind):
    path = tmp_path / "bench.sqlite"
    in_place(path, "huge" if kind == "garbage" else kind, b"not a database" * 1000)
    done = edgepilot(tmp_path, "bench", "--history")
    assert done.returncode == 2, done.stderr
    (line,) = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert str(path) in line and "replace" not in line, line  # a read replaces nothing


# -- a memory calibration, through fit on llama.cpp's programs -----------------------------------------


def test_fit_plans_on_a_hostile_calibration_as_on_none(tmp_path, gemma_path):
    """llama-server here only says its version (the calibration is kept per version); fit runs nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    server = bin_dir / "llama-server"
    server.write_text("#!/bin/sh\necho 'version: 0.7.0 (build 11669, commit Debian)'\n")
    server.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    data = tmp_path / "data"
    args = ["fit", str(gemma_path), "--engine", "tools", "--ctx", "512", "--json"]
    none = edgepilot(data, *args, path=path)
    assert none.returncode == 0, none.stderr
    (folder,) = [data / "calibration"]
    folder.mkdir(parents=True, exist_ok=True)
    from edgepilot.tuned.calibrate import model_key

    key = model_key(gemma_path)
    file = folder / "llama-server-path-0.7.0-11669-Debian.json"
    for entry in (
        '{"runtime": [NaN], "n_vocab": "x"}',
        '{"runtime": ["x"], "compute_delta": Infinity}',
        '{"runtime": [-1000000000]}',
        '{"runtime": [true], "running_extra": [-Infinity]}',
    ):
        file.write_text(f'{{"models": {{"{key}": {entry}}}}}')
        done = edgepilot(data, *args, path=path)
        assert done.returncode == 0, done.stderr
        peak = strict_json(done.stdout)["memory"]["peak_rss_bytes"]
        assert peak >= strict_json(none.stdout)["memory"]["peak_rss_bytes"], entry
        (note,) = notes(done.stderr)
        assert str(file) in note, note
    file.unlink()
    os.mkfifo(file)
    done = edgepilot(data, *args, path=path)
    assert done.returncode == 0 and any("FIFO" in n for n in notes(done.stderr)), done.stderr


def test_a_profile_is_written_within_what_its_reader_accepts(tmp_path, monkeypatch):
    """Notes are the one open-ended field of a profile: the writer keeps the file under the reader's cap."""
    from edgepilot.tuned import profiles

    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path))
    profile = profiles.Profile(**{**GOOD_PROFILE, "notes": ["a long note " * 100] * 2000})
    path = profiles.save_profile(profile)
    assert path.stat().st_size <= profiles.PROFILE_FILE
    kept = profiles.read_profile(path)
    assert kept is not None and kept.notes and kept.n_threads == 2
