"""`edgepilot pull` retries a broken transfer by itself: each new try resumes the `.part` with Range after a
doubling pause and says so in one line; a hub that always breaks ends in the usual one line, exit 2, after
the bounded tries, the part kept. Real processes against the local hub (tests/store/hubserver.py)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from hubserver import REPO, SMOL

EDGEPILOT = [sys.executable, "-m", "edgepilot"]
CUT = 20 << 20


def run_pull(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EDGEPILOT, "pull", REPO, SMOL, *args],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def pull_env(backoff: str = "0.2", tries: str | None = None) -> dict[str, str]:
    env = dict(os.environ, EDGEPILOT_PULL_BACKOFF=backoff)
    if tries is not None:
        env["EDGEPILOT_PULL_TRIES"] = tries
    return env


def folder() -> Path:
    return Path(os.environ["EDGEPILOT_MODELS_DIR"]) / "edge-test__small-models-GGUF"


def test_one_cut_is_retried_and_the_pull_completes(hub):
    hub.cut_after = CUT
    done = run_pull(pull_env(), "--json")
    assert done.returncode == 0, done.stderr
    retries = [ln for ln in done.stderr.splitlines() if "retrying" in ln]
    size = hub.repos[REPO][SMOL].path.stat().st_size
    assert retries == [
        f"transfer broke at {CUT / 2**20:.1f} of {size / 2**20:.1f} MiB: retrying (2 of 3) in 0.2 s"
    ]
    out = json.loads(done.stdout)
    target = folder() / SMOL
    assert hashlib.sha256(target.read_bytes()).hexdigest() == out["sha256"] == hub.repos[REPO][SMOL].digest()
    assert not (folder() / (SMOL + ".part")).exists()
    cdn = [r for p, r in hub.requests if p == f"/cdn/{REPO}/{SMOL}"]
    assert cdn == [None, f"bytes={CUT}-"]  # the second try resumed with Range


def test_a_hub_that_always_cuts_ends_in_one_line_after_the_bounded_tries(hub):
    hub.cut_after, hub.cut_always = CUT, True
    started = time.monotonic()
    done = run_pull(pull_env(backoff="0.5"))
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert [ln.split(":")[-1] for ln in lines[:-1]] == [
        " retrying (2 of 3) in 0.5 s",
        " retrying (3 of 3) in 1 s",
    ]
    assert len(lines) == 3 and lines[-1].startswith("edgepilot: error: ") and "Traceback" not in done.stderr
    assert "tried 3 times" in lines[-1] and "run the same pull again to resume" in lines[-1]
    assert elapsed >= 1.5  # the pauses were taken: 0.5 s, then 1 s
    cdn = [r for p, r in hub.requests if p == f"/cdn/{REPO}/{SMOL}"]
    assert cdn == [None, f"bytes={CUT}-", f"bytes={2 * CUT}-"]  # three tries, each resuming
    part = folder() / (SMOL + ".part")
    assert part.stat().st_size == 3 * CUT and not (folder() / SMOL).exists()  # kept for the next pull

    hub.cut_always, hub.cut_after = False, None
    again = run_pull(pull_env(), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["resumed_from"] == 3 * CUT


def test_a_bad_retry_setting_is_one_line(hub):
    for name, value in (("EDGEPILOT_PULL_TRIES", "0"), ("EDGEPILOT_PULL_BACKOFF", "soon")):
        done = run_pull(dict(os.environ, **{name: value}))
        assert done.returncode == 2 and name in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
