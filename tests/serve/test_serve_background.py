"""A real `edgepilot serve` that Android moves to the cached class (the test writes its oom_score_adj, as
ActivityManager would) says so once in its log, and shows it on /health and the status page."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from servekit import Served, start_server, write_device

TERMUX = {"TERMUX_VERSION": "0.118.1", "PREFIX": "/data/data/com.termux/files/usr"}

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="raising another process's oom_score_adj needs root"
)


def _health(server: Served) -> dict:
    code, _, body = server.request("GET", "/health", timeout=10)
    assert code == 200, body
    return json.loads(body)


@pytest.fixture(scope="module")
def moved(smollm_path, tmp_path_factory):
    """(server, /health before the move): a server moved to the cached class once it was ready."""
    tmp = tmp_path_factory.mktemp("serve-background")
    write_device(tmp / "device")
    server = start_server(
        smollm_path, "--ctx", "512", "--watch-root", str(tmp / "device"), tmp=tmp, env=TERMUX
    )
    try:
        server.wait_ready()
        before = _health(server)
        Path(f"/proc/{server.info['pid']}/oom_score_adj").write_text("900")
        deadline = time.monotonic() + 30
        while _health(server)["background"]["class"] != "cached":
            assert time.monotonic() < deadline, server.stderr()
            time.sleep(0.2)
        yield server, before
    finally:
        server.stop()


def test_health_shows_the_class_and_the_fix(moved):
    server, before = moved
    assert before["status"] == "ok" and before["background"] == {
        "class": "kept",
        "oom_score_adj": 0,
        "warning": None,
    }
    after = _health(server)["background"]
    assert after["oom_score_adj"] == 900 and after["class"] == "cached"
    assert after["warning"].startswith("background: this process now has oom_score_adj 900")
    assert "termux-wake-lock" in after["warning"]
    assert server.status()["background"]["warning"] == after["warning"]
    time.sleep(2.5)  # two more readings: still cached, not said again
    assert server.stderr().count("now has oom_score_adj 900") == 1


def test_the_status_page_shows_it(moved):
    server, _ = moved
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if browser is None:
        pytest.skip("no chromium: apt-get install -y chromium")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--virtual-time-budget=6000"]
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [browser, *flags, f"--user-data-dir={profile}", "--dump-dom"]
            + [f"http://127.0.0.1:{server.port}/#key={server.key}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'id="background">cached · 900<' in done.stdout
    assert 'id="background_note" class="death">background: this process now has' in done.stdout
