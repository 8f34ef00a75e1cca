"""`run --rpc`: a real completion with the layers on two loopback rpc-server helpers; a helper killed
mid-generation ends the run with the doctor's cause (exit 2), not a hang."""

from __future__ import annotations

import subprocess
import sys

import pytest
from netkit import free_port, wait_listening

EDGEPILOT = [sys.executable, "-m", "edgepilot"]


def _helper(tool) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen(
        [str(tool), "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port, proc)
    except AssertionError:
        proc.kill()
        raise
    return proc, port


@pytest.fixture
def helpers(rpc_server_tool):
    started = [_helper(rpc_server_tool) for _ in range(2)]
    yield started
    for proc, _ in started:
        proc.kill()
        proc.wait(10)


def test_run_over_two_helpers_answers_and_a_killed_helper_is_diagnosed(helpers, smollm_path):
    rpc = ",".join(f"127.0.0.1:{port}" for _, port in helpers)
    base = [*EDGEPILOT, "run", str(smollm_path), "--ctx", "512", "--temp", "0", "--rpc", rpc]
    out = subprocess.run(
        [*base, "-p", "The capital of France is", "-n", "8", "--json"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    import json

    result = json.loads(out.stdout)
    assert result["text"].strip() and result["rpc"] == rpc.split(",")
    assert result["n_gen"] > 0 and result["gen_tps"] > 0 and result["n_prompt"] > 0
    assert result["peak_rss_bytes"] > 0 and result["settings"]["n_ctx"] == 512
    assert result["command"][result["command"].index("--rpc") + 1] == rpc

    proc = subprocess.Popen(
        # a count the model goes on with until the context is full: a story could end before the kill
        [*base, "--raw", "-p", "1, 2, 3, 4, 5, 6, 7, 8,", "-n", "2000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = proc.stdout.read(8)  # type: ignore[union-attr]  (generation has begun)
    assert first
    helpers[1][0].kill()
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("run hung after a helper was killed") from None
    assert proc.returncode == 2, err
    assert "went away mid-run" in err and "edgepilot rpc-server" in err, err
