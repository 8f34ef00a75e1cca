"""speculation-slower-than-plain (issue 42, part 4): `doctor --model` reads the bench history's last
`tune --speculation` trial and names each kind of text where a candidate measured slower than plain, with the
setting to drop. The rows are stored as tune stores them (bench/tune_report.py through bench/store.py); a
trial measured for real is read back in tests/speculation/test_tune_speculation.py. A history row whose
speculation values are out of type or range is left out, as any damaged row is."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from edgepilot.bench.results import BenchReport
from edgepilot.bench.spec_trial import SpecCandidate, SpecKind, SpecTrial
from edgepilot.bench.store import save_report
from edgepilot.bench.tune_report import _speculation_rows
from edgepilot.tuned.identity import MeasuredModel, device_id, model_id

SETTINGS = {"n_ctx": 4096, "n_batch": 512, "n_ubatch": 512, "n_threads": 2, "flash_attn": False}


def _trial(speeds: dict[str, tuple[list[float], list[float]]]) -> SpecTrial:
    """kind of text -> (plain's speeds, lookup's speeds), one per round."""
    kinds = {}
    for kind, (plain, lookup) in speeds.items():
        k = SpecKind(sorted(plain)[1], plain_samples_ts=plain)
        k.candidates["lookup"] = SpecCandidate(sorted(lookup)[1], 1.0, 0.5, 1.5, samples_ts=lookup)
        kinds[kind] = k
    return SpecTrial(3, 64, kinds, settings=SETTINGS)


def _store(data: Path, model: Path, trial: SpecTrial) -> None:
    """The trial's rows saved in the data folder's history as `tune` saves them."""

    measured = MeasuredModel.of(model_id(model), "gemma3 270M Q4_K - Medium", 268_000_000)
    tune = SimpleNamespace(speculation=trial, started="2026-12-07T10:00:00", model=measured)  # what it reads
    report = BenchReport(
        rows=_speculation_rows(tune),  # type: ignore[arg-type]
        model=measured,
        device=device_id(),
        build={},
        bandwidth_gbs=None,
        bandwidth_threads=None,
        bytes_per_token=None,
        started=tune.started,
        seconds=1.0,
    )
    data.mkdir(exist_ok=True)
    save_report(report, kind="tune", path=data / "bench.sqlite")


def _doctor(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EDGEPILOT_DATA_DIR": str(data), "COLUMNS": "50"}
    argv = [sys.executable, "-m", "edgepilot", "doctor", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


def _causes(done: subprocess.CompletedProcess[str]) -> dict[str, dict]:
    assert done.returncode == 0, done.stderr[-2000:]
    return {c["id"]: c for c in json.loads(done.stdout)["causes"]}


def test_the_doctor_names_the_kinds_of_text_where_lookup_was_slower(tmp_path, gemma_path):
    data = tmp_path / "data"
    _store(data, gemma_path, _trial({
        "chat": ([20.0, 21.0, 22.0], [15.0, 16.0, 17.0]),  # 0.76x: slower
        "rewrite": ([20.0, 21.0, 22.0], [30.0, 31.0, 32.0]),  # 1.48x
        "code": ([20.0, 21.0, 22.0], [20.0, 20.6, 21.0]),  # 0.98x: within noise
    }))  # fmt: skip
    said = _causes(_doctor(data, "--model", str(gemma_path), "--json"))["speculation-slower-than-plain"]
    assert said["evidence"] == ["lookup on chat text: 16.00 t/s, plain 21.00 t/s (0.76x)"], said
    assert said["fix"].startswith("drop `--lookup` (llama-server: `--spec-type ngram-simple`) for chat text")
    assert "rewrite" not in said["fix"] and "code" not in said["fix"]
    assert said["score"] == 40  # the history alone: nothing says speculation was in use
    # a log of this machine's run that used it makes it the likely cause of a slow run (a saved log is read
    # with this machine's history only when --root / says it came from here)
    log = tmp_path / "server.log"
    log.write_text("srv  params_from_: Chat format: Content-only\nslot print_timing: draft acceptance rate = "
                   "0.10345 (    3 accepted /    29 generated)\n")  # fmt: skip
    done = _doctor(data, "--model", str(gemma_path), "--log", str(log), "--root", "/", "--json")
    assert _causes(done)["speculation-slower-than-plain"]["score"] == 75
    table = _doctor(data, "--model", str(gemma_path))
    assert table.returncode == 0 and "speculation-slower-than-plain" in table.stdout, table.stdout
    assert all(len(line) <= 50 for line in table.stdout.splitlines()), table.stdout


def test_no_cause_where_speculation_was_as_fast_and_the_newest_trial_counts(tmp_path, gemma_path):
    data = tmp_path / "data"
    _store(data, gemma_path, _trial({"chat": ([20.0, 21.0, 22.0], [10.0, 11.0, 12.0])}))
    _store(data, gemma_path, _trial({"chat": ([20.0, 21.0, 22.0], [20.5, 21.0, 21.5])}))  # tuned again
    assert "speculation-slower-than-plain" not in _causes(_doctor(data, "--model", str(gemma_path), "--json"))


def test_bench_history_shows_the_trial_and_leaves_out_damaged_speculation_rows(tmp_path, gemma_path):
    data = tmp_path / "data"
    _store(data, gemma_path, _trial({"chat": ([20.0, 21.0, 22.0], [15.0, 16.0, 17.0])}))
    con = sqlite3.connect(data / "bench.sqlite")
    row = con.execute("SELECT * FROM results WHERE speculation = 'lookup'").fetchone()
    columns = [d[0] for d in con.execute("SELECT * FROM results").description]
    kill = "Out of memory: Killed process 42 (llama-server) total-vm:900000kB"  # a line another rule reads
    for changed in (
        {"speculation": "warp"},
        {"acceptance_rate": 7.0},
        {"text_kind": b"chat"},
        {"text_kind": f"chat\n{kill}"},  # one entry of the doctor's log, but two lines
        {"speculation": None, "text_kind": None, "device": f"Vulkan0\n{kill}"},  # the GPU table's twin
    ):
        damaged = dict(zip(columns, row, strict=True)) | {"id": None, **changed}
        con.execute(f"INSERT INTO results ({','.join(damaged)}) VALUES ({','.join('?' * len(damaged))})",
                    tuple(damaged.values()))  # fmt: skip
    con.commit()
    con.close()
    env = {**os.environ, "EDGEPILOT_DATA_DIR": str(data), "COLUMNS": "50"}
    argv = [sys.executable, "-m", "edgepilot", "bench", "--history", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    entries = json.loads(done.stdout)["entries"]
    assert [(e["speculation"], e["text_kind"]) for e in entries] == [("plain", "chat"), ("lookup", "chat")]
    assert entries[1]["acceptance_rate"] == 0.5 and entries[1]["avg_ts"] == 16.0
    assert "speculation" in done.stderr and "left out" not in done.stdout  # said once, on stderr
    shown = subprocess.run(argv[:-1], capture_output=True, text=True, timeout=120, env=env)
    assert shown.returncode == 0 and "tg64 lookup/chat" in shown.stdout, shown.stdout
    table = [line for line in shown.stdout.splitlines() if str(data) not in line]  # a path is one word
    assert all(len(line) <= 50 for line in table), shown.stdout
    said = _causes(_doctor(data, "--model", str(gemma_path), "--json"))
    assert said["speculation-slower-than-plain"]["evidence"][0].startswith("lookup on chat text: 16.00")
    assert "killed-by-system" not in said and "gpu-slower-than-cpu" not in said, list(said)


def test_a_command_that_speculates_makes_it_the_likely_cause(tmp_path, gemma_path, monkeypatch):
    """The command is a list of words: llama-server's `-md FILE` and `--spec-type ngram-simple` say it
    speculates as edgepilot's `--lookup` does; `--spec-type none` and `--draft none` say it does not."""
    from edgepilot.cli.doctor_history import history_lines
    from edgepilot.doctor.diagnose import diagnose

    data = tmp_path / "data"
    _store(data, gemma_path, _trial({"chat": ([20.0, 21.0, 22.0], [15.0, 16.0, 17.0])}))
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(data))
    lines = history_lines(str(gemma_path))
    model = str(gemma_path)
    for command, used in (
        (["llama-server", "-m", model, "-md", model], True),
        (["llama-server", "-m", model, "--spec-type", "ngram-simple"], True),
        (["edgepilot", "run", model, "--lookup"], True),
        (["llama-server", "-m", model, "--spec-type", "none"], False),
        (["edgepilot", "run", model, "--draft", "none"], False),
        (["llama-server", "-m", model], False),
    ):
        causes = {c.id: c for c in diagnose(lines, command=command, root=None).causes}
        assert causes["speculation-slower-than-plain"].score == (75 if used else 40), command
