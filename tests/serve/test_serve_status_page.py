"""The status page at `/` in a real headless browser (Debian's chromium): it loads its script under the
CSP, asks for the key, and shows live numbers once it has one. Skipped where chromium is not installed."""

from __future__ import annotations

import shutil
import subprocess
import tempfile

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = [
    "--headless",
    "--no-sandbox",  # the tests may run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1200,900",
    "--virtual-time-budget=6000",  # let the page's fetch and timers run before the DOM is taken
]


@pytest.fixture(scope="module")
def browser() -> str:
    for name in BROWSERS:
        exe = shutil.which(name)
        if exe:
            return exe
    pytest.skip("no chromium: apt-get install -y chromium")


def _chromium(browser: str, url: str, *extra: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [browser, *FLAGS, f"--user-data-dir={profile}", *extra, url],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_status_page_shows_live_numbers(browser, served, tmp_path):
    served.client().chat.completions.create(
        model="any", messages=[{"role": "user", "content": "Say something."}], max_tokens=12
    )
    url = f"http://127.0.0.1:{served.port}/#key={served.key}"
    dom = _chromium(browser, url, "--dump-dom")
    assert 'id="phase" class="badge ready">ready<' in dom
    assert 'id="ctx">512 tokens<' in dom
    assert 'id="model" class="dim">SmolLM2-135M-Instruct.Q4_1.gguf<' in dom
    assert 'id="gen_tps">–<' not in dom  # a real tokens/s figure
    assert 'id="available">–<' not in dom

    shot = tmp_path / "status.png"
    _chromium(browser, url, f"--screenshot={shot}")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_status_page_asks_for_the_key(browser, served):
    dom = _chromium(browser, f"http://127.0.0.1:{served.port}/", "--dump-dom")
    assert "API key needed" in dom
    assert '<form id="keyform">' in dom  # shown (no longer hidden)
    assert 'id="ctx">–<' in dom  # and nothing leaked without it
