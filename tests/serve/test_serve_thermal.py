"""`edgepilot serve --max-temp` on a device tree whose CPU thermal zone the test rewrites. edgepilot's own
worker moves both lanes to fewer threads between tokens (the count read back from llama.cpp shows in the
status) and says so once in the server's log, and once when it goes back; llama-server takes its thread count
only when it starts, so with it the server watches and warns."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from servekit import Served, start_server, write_device

DEADLINE = 120.0
FEWER = (
    "thermal: CPU at 90 °C, above --max-temp 80: generating on 1 thread instead of 2 until it cools to 75 °C"
)
BACK = "thermal: CPU down to 70 °C: generating on 2 threads again"


def _device(root: Path, celsius: float) -> Path:
    write_device(root)
    zone = root / "sys/class/thermal/thermal_zone0"
    zone.mkdir(parents=True, exist_ok=True)
    (zone / "type").write_text("cpu-thermal\n")
    _heat(root, celsius)
    return root


def _heat(root: Path, celsius: float) -> None:
    (root / "sys/class/thermal/thermal_zone0/temp").write_text(f"{int(celsius * 1000)}\n")


def _until(what: Callable[[], Any], server: Served) -> Any:
    end = time.monotonic() + DEADLINE
    while not (got := what()):
        assert time.monotonic() < end, server.stderr()[-3000:]
        time.sleep(0.3)
    return got


def _ask(server: Served) -> None:
    body = {"messages": [{"role": "user", "content": "Count to ten."}], "max_tokens": 8, "temperature": 0}
    code, reply, _ = server.chat(body)
    assert code == 200, reply


@pytest.fixture(scope="module")
def hot_server(smollm_path, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve-thermal")
    device = _device(tmp / "device", 45)
    args = ["--ctx", "512", "--threads", "2", "--max-tokens", "16", "--max-temp", "80"]
    server = start_server(smollm_path, *args, "--watch-root", str(device), tmp=tmp)
    try:
        server.wait_ready()
        yield server, device
    finally:
        server.stop()


def test_the_worker_moves_to_fewer_threads_between_tokens_and_back(hot_server):
    server, device = hot_server
    assert (
        "--max-temp 80: above it generation moves from 2 threads to 1 between tokens, back at 75 °C"
        in (server.info["notes"])
    )
    cool = _until(lambda: (server.status()["thermal"] or {}).get("celsius") == 45 and server.status(), server)
    assert cool["thermal"] == {
        "max_temp_c": 80.0,
        "resume_below_c": 75.0,
        "celsius": 45.0,
        "peak_c": 45.0,
        "hot": False,
        "n_threads": 2,
        "switches": 0,
        "warning": None,
        "reason": None,
    }
    _heat(device, 90)
    _ask(server)  # the request's generation starts with a fresh reading: hot, so on one thread
    hot = _until(lambda: (t := server.status()["thermal"])["switches"] == 1 and t, server)
    assert (hot["hot"], hot["n_threads"], hot["warning"]) == (True, 1, FEWER)  # read back from llama.cpp
    _ask(server)  # still hot: nothing more said
    _until(lambda: FEWER in server.stderr(), server)
    _heat(device, 70)
    _ask(server)
    back = _until(lambda: (t := server.status()["thermal"])["switches"] == 2 and t, server)
    assert (back["hot"], back["n_threads"], back["warning"], back["peak_c"]) == (False, 2, BACK, 90.0)
    log = _until(lambda: BACK in server.stderr() and server.stderr(), server)
    assert log.count(FEWER) == 1 and log.count(BACK) == 1, log[-3000:]


def test_with_llama_server_it_warns_once(smollm_path, tmp_path):
    device = _device(tmp_path / "device", 45)
    args = ["--ctx", "512", "--threads", "2", "--max-tokens", "8", "--max-temp", "80", "--engine", "tools"]
    server = start_server(smollm_path, *args, "--watch-root", str(device), tmp=tmp_path)
    try:
        server.wait_ready()
        fixed = "llama-server keeps the 2 threads it started with (it takes no thread count per request)"
        assert any(
            note.startswith("--max-temp 80: above it the log says so; " + fixed)
            for note in (server.info["notes"])
        ), server.info["notes"]
        _heat(device, 90)
        warning = (
            f"thermal: CPU at 90 °C, above --max-temp 80: {fixed}: lower --threads, or use --engine inprocess"
        )
        _until(lambda: warning in server.stderr(), server)
        _ask(server)
        status = server.status()["thermal"]
        assert (status["hot"], status["n_threads"], status["switches"], status["warning"]) == (
            True,
            None,
            1,
            warning,
        )
        assert server.stderr().count("thermal: ") == 1
    finally:
        server.stop()
