"""`bench --sustained`: the battery's draw per window and tokens per joule (from a phone's device tree whose
battery files the test rewrites during a real run: this machine has no battery), and the chart of speed and
temperature over time, in the terminal and as a PNG."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

BATTERY = "sys/class/power_supply/battery"
ZONE = "sys/class/thermal/thermal_zone0"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _phone(devices: Path, tmp_path: Path, status: str = "Discharging") -> Path:
    """The Pixel 6a's tree (a discharging battery: -812 mA at 3.862 V) with a CPU thermal zone at 41 °C."""
    tree = tmp_path / "pixel6a"
    shutil.copytree(devices / "pixel6a-tensor-g1", tree)
    (tree / BATTERY / "status").write_text(status + "\n")
    (tree / ZONE).mkdir(parents=True)
    (tree / ZONE / "type").write_text("BIG\n")
    (tree / ZONE / "temp").write_text("41000\n")
    return tree


def _render(report) -> str:
    from edgepilot.cli.sustained_render import render_sustained

    out = Console(width=50, file=io.StringIO())
    render_sustained(report, out)
    return out.file.getvalue()


def test_battery_draw_and_tokens_per_joule_follow_the_batterys_files(smollm_path, devices, tmp_path):
    from edgepilot.bench.sustained import run_sustained

    tree = _phone(devices, tmp_path)
    assert (tree / BATTERY / "current_now").read_text().strip() == "-812000"
    assert (tree / BATTERY / "voltage_now").read_text().strip() == "3862000"
    rewritten = []

    def progress(desc: str, _done: int, _total: int) -> None:
        # the second window began (the first one's readings are all taken): a heavier draw, a hotter CPU
        if desc.startswith("window 2/") and not rewritten:
            (tree / BATTERY / "current_now").write_text("-1500000\n")
            (tree / BATTERY / "voltage_now").write_text("3800000\n")
            (tree / ZONE / "temp").write_text("55000\n")
            rewritten.append(desc)

    report = run_sustained(smollm_path, 6, 2, n_threads=1, progress=progress, root=tree)
    assert rewritten and len(report.windows) == 3
    first, _, last = report.windows
    assert first.watts == pytest.approx(0.812 * 3.862, abs=0.001) and first.temp_c == 41
    assert last.watts == pytest.approx(1.5 * 3.8, abs=0.001) and last.temp_c == 55
    joules = sum(w.watts * w.seconds for w in report.windows)
    tokens = sum(w.tokens for w in report.windows)
    assert report.power_windows == 3 and report.power_note is None
    assert report.tokens_per_joule == pytest.approx(tokens / joules, rel=0.001)
    assert report.watts == pytest.approx(joules / sum(w.seconds for w in report.windows), rel=0.001)
    assert 3.1 < report.watts < 5.7

    text = _render(report)
    assert f"battery draw {report.watts:.2f} W, {report.tokens_per_joule:.1f} tokens per joule" in text
    rows = [line.split() for line in text.splitlines() if line.split()[:1] in (["0s"], ["4s"])]
    assert rows[0][-1] == "3.14" and rows[1][-1] == "5.70", text  # the table's W column
    assert "t/s (line) and °C (dots) over time" in text and "seconds" in text
    assert max(len(line) for line in text.splitlines()) <= 50, text


def test_a_charging_battery_says_power_is_not_measurable(smollm_path, devices, tmp_path):
    from edgepilot.bench.sustained import run_sustained

    report = run_sustained(smollm_path, 4, 2, n_threads=1, root=_phone(devices, tmp_path, "Charging"))
    assert [w.watts for w in report.windows] == [None, None]
    assert report.tokens_per_joule is None and report.watts is None
    assert report.power_note == "battery charging: power draw not measurable while plugged in"
    text = " ".join(_render(report).split())  # the note wraps at 50 columns
    assert "power draw not measurable while plugged in" in text and "tokens per joule" not in text


def test_a_battery_with_only_power_now_is_read_in_microwatts(devices, tmp_path):
    from edgepilot.bench.monitor import Sensors

    tree = _phone(devices, tmp_path)
    (tree / BATTERY / "current_now").unlink()
    (tree / BATTERY / "power_now").write_text("2750000\n")
    sensors = Sensors.find(tree)
    assert sensors.battery == "battery" and sensors.watts() == pytest.approx(2.75)
    (tree / BATTERY / "status").write_text("Charging\n")  # plugged in during the run
    assert sensors.watts() is None


def test_the_chart_follows_the_table_and_the_png_is_a_png(cli_app, smollm_path, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "sustained.png"
    cmd = ["bench", str(smollm_path), "--sustained", "6s", "--window", "2", "-t", "1", "--plot", str(png)]
    res = CliRunner().invoke(cli_app, cmd, env={"COLUMNS": "50"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(line) for line in lines) <= 50, res.output
    steady = next(i for i, line in enumerate(lines) if line.startswith("first "))
    title = next(i for i, line in enumerate(lines) if "t/s over time" in line)
    assert steady < title  # below the table and its summary
    assert "┤" in lines[title + 2]  # a y tick on the speed axis
    assert any(line.split() == ["t/s", "seconds"] for line in lines[title:])  # the axes' labels
    assert png.read_bytes()[:8] == PNG_MAGIC and f"plot: {png}" in res.output.replace("\n", "")

    as_json = CliRunner().invoke(cli_app, [*cmd, "--json", "--no-save"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["plot_png"] == str(png)


def test_without_matplotlib_plot_is_refused_before_measuring(cli_app, smollm_path, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an install without the plot extra sees
    png = tmp_path / "sustained.png"
    res = CliRunner().invoke(
        cli_app, ["bench", str(smollm_path), "--sustained", "60s", "--window", "2", "--plot", str(png)]
    )
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [
        "edgepilot: error: --plot needs matplotlib: pip install 'edgepilot[plot]'"
    ]
    assert not png.exists()
