"""--max-temp on a real run: a device tree whose thermal zone the test rewrites while SmolLM2 generates, as
the kernel rewrites /sys/class/thermal/thermal_zoneN/temp. Above the limit the in-process engine moves to half
the threads between two tokens (llama_set_n_threads, read back from llama.cpp), says so once, and goes back to
all of them at 5 °C below the limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

import edgepilot
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.engine.thermal_guard import ThermalGuard, ThermalLimit, parse_max_temp
from edgepilot.jsonable import dumps
from edgepilot.plan.requested import RequestedSettings
from edgepilot.run.runner import run_model

SRC = str(Path(edgepilot.__file__).resolve().parent.parent)
COUNTING = "1, 2, 3, 4, 5, 6,"  # greedy, SmolLM2 counts on for as long as it is let
TWO = RequestedSettings(n_ctx=1024, n_threads=2)
FEWER = "generating on 1 thread instead of 2"


def device(tmp_path: Path, celsius: float) -> Path:
    """A device tree with one CPU thermal zone (and a battery zone, cooler, that must not count)."""
    root = tmp_path / "device"
    for n, kind in ((0, "battery"), (1, "cpu-1-0-usr")):
        zone = root / f"sys/class/thermal/thermal_zone{n}"
        zone.mkdir(parents=True)
        (zone / "type").write_text(f"{kind}\n")
    (root / "sys/class/thermal/thermal_zone0/temp").write_text("30000\n")
    heat(root, celsius)
    return root


def heat(root: Path, celsius: float) -> None:
    """Rewrite the CPU zone's temp in place, as sysfs does (millidegrees)."""
    (root / "sys/class/thermal/thermal_zone1/temp").write_text(f"{int(celsius * 1000)}\n")


def test_a_run_that_heats_up_moves_to_fewer_threads_and_back(smollm_path, tmp_path):
    root = device(tmp_path, 45)
    said: list[str] = []
    pieces: list[str] = []

    def on_text(piece: str) -> None:  # the generation's own thread: the device heats, then cools
        pieces.append(piece)
        if len(pieces) == 4:
            heat(root, 83)
        if len(said) == 1 and FEWER in said[0]:
            heat(root, 74)  # 6 °C under the limit: past the 5 °C of hysteresis

    result = run_model(
        str(smollm_path),
        COUNTING,
        n_predict=300,
        requested=TWO,
        sampler=SamplerSettings(temperature=0),
        raw_prompt=True,
        on_text=on_text,
        thermal=ThermalLimit(80, root, interval=0.05),
        on_thermal=said.append,
    )
    t = result.thermal
    assert t is not None and result.n_gen == 300, said
    assert said == t.notes and len(said) == 2, said
    assert said[0] == f"thermal: CPU at 83 °C, above --max-temp 80: {FEWER} until it cools to 75 °C"
    assert said[1] == "thermal: CPU down to 74 °C: generating on 2 threads again"
    down, up = t.switches
    assert (down.to, down.celsius, down.n_threads, down.n_threads_batch) == ("fewer", 83, 1, 1)
    assert (up.to, up.celsius, up.n_threads, up.n_threads_batch) == ("full", 74, 2, 2)
    assert 4 <= down.at_token < up.at_token < 300  # while it generated, between tokens
    assert (t.full_threads, t.fewer_threads, t.peak_c, t.sensor) == (2, 1, 83, "cpu-1-0-usr")
    assert result.text.startswith(" 7, 8, 9")  # the same greedy text whatever the thread count
    assert json.loads(dumps(result))["thermal"]["switches"][0]["n_threads"] == 1


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, (SRC, os.environ.get("PYTHONPATH"))))
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "200"}


def _cli_run(model: Path, root: Path, *args: str, heat_to: float | None = None) -> tuple[int, str, str]:
    """A real `edgepilot run` on the device tree; with heat_to, the zone is heated once tokens stream."""
    argv = [sys.executable, "-m", "edgepilot", "run", str(model), "--raw", "--temp", "0", "-p", COUNTING]
    argv += ["--ctx", "1024", "--threads", "2", "--watch-root", str(root), *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True)
    reader.start()
    first = b""
    if heat_to is not None:
        first = proc.stdout.read(1)  # generating
        heat(root, heat_to)
    rest = proc.stdout.read()
    proc.wait(600)
    reader.join(10)
    return proc.returncode, (first + rest).decode(), b"".join(err).decode()


def test_the_cli_says_once_that_it_moved_to_fewer_threads(smollm_path, tmp_path):
    root = device(tmp_path, 45)
    code, out, err = _cli_run(smollm_path, root, "--max-temp", "80", "-n", "200", heat_to=90)
    assert code == 0, err[-3000:]
    assert out.startswith(" 7, 8, 9"), out[:200]
    assert err.count("thermal: CPU at 90 °C, above --max-temp 80") == 1, err[-3000:]
    assert err.count(FEWER) == 1 and "again" not in err
    assert "cpu peak 90 °C (limit 80), 1 thread switch" in out  # the summary
    assert "threads 2 (1 while hot)" in out


def test_a_json_run_records_the_switch_and_the_threads_llama_cpp_used(smollm_path, tmp_path):
    root = device(tmp_path, 85)  # hot before it starts: the first token already runs on fewer threads
    code, out, err = _cli_run(smollm_path, root, "--max-temp", "80", "-n", "8", "--json")
    assert code == 0, err[-3000:]
    t = json.loads(out)["thermal"]
    assert t["switches"] == [
        {"to": "fewer", "celsius": 85.0, "seconds": t["switches"][0]["seconds"], "at_token": 0}
        | {"n_threads": 1, "n_threads_batch": 1}
    ]
    assert (t["max_temp_c"], t["resume_below_c"], t["full_threads"], t["fewer_threads"]) == (80, 75, 2, 1)
    assert t["hot"] is True and t["notes"] == [err[err.index("thermal: ") :].split("\n")[0]]


def test_a_run_on_llama_server_warns_and_keeps_its_threads(smollm_path, tmp_path):
    root = device(tmp_path, 85)
    code, out, err = _cli_run(smollm_path, root, "--max-temp", "80", "-n", "4", "--engine", "tools", "--json")
    assert code == 0, err[-3000:]
    assert err.count("above --max-temp 80: llama-server keeps the 2 threads it started with") == 1, err
    t = json.loads(out)["thermal"]
    assert [(s["to"], s["n_threads"]) for s in t["switches"]] == [("fewer", None)]
    assert (t["full_threads"], t["fewer_threads"], t["hot"]) == (None, None, True)
    assert t["reason"].startswith("llama-server keeps the 2 threads")


def test_a_run_below_the_limit_says_nothing(smollm_path, tmp_path):
    root = device(tmp_path, 45)
    code, out, err = _cli_run(smollm_path, root, "--max-temp", "80", "-n", "8", "--json")
    assert code == 0, err[-3000:]
    assert "thermal" not in err, err[-3000:]
    t = json.loads(out)["thermal"]
    assert (t["switches"], t["notes"], t["peak_c"], t["hot"], t["reason"]) == ([], [], 45.0, False, None)


def test_without_a_readable_sensor_it_says_so_once(smollm_path, tmp_path):
    root = tmp_path / "no-sensors"
    root.mkdir()
    code, out, err = _cli_run(smollm_path, root, "--max-temp", "80", "-n", "4", "--json")
    assert code == 0, err[-3000:]
    assert err.count("thermal: --max-temp 80 cannot be kept: no readable CPU temperature") == 1, err
    assert json.loads(out)["thermal"]["switches"] == []


@pytest.mark.parametrize("command", ["run", "chat", "serve"])
@pytest.mark.parametrize(
    ("value", "why"),
    [("abc", "not a temperature"), ("-5", "out of range"), ("500", "out of range"), ("nan", "out of range")],
)
def test_bad_max_temp_is_one_line_and_exit_2(cli_app, command, value, why):
    res = CliRunner().invoke(cli_app, [command, "--max-temp", value])
    assert res.exit_code == 2 and res.stdout == "", res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"edgepilot: error: --max-temp {value}: {why}"), lines


@pytest.mark.parametrize(("text", "value"), [("80", 80.0), ("72.5C", 72.5), (" 90°C", 90.0), (None, None)])
def test_max_temp_takes_degrees_celsius(text, value):
    assert parse_max_temp(text) == value


def test_hysteresis_keeps_it_hot_until_five_degrees_under(tmp_path):
    root = device(tmp_path, 79)
    guard = ThermalGuard(ThermalLimit(80, root))
    guard.check()
    assert not guard.report().hot
    for celsius, hot in ((80.5, True), (78, True), (75.1, True), (75, False), (79.9, False), (81, True)):
        heat(root, celsius)
        guard.check()
        assert guard.report().hot is hot, celsius
    # no engine to switch: each crossing is recorded, the first of each kind said
    assert [s.to for s in guard.switches] == ["fewer", "full", "fewer"]
    assert len(guard.notes) == 2
