"""`edgepilot serve` refuses what would be unsafe or cannot work: one stderr line, exit status 2."""

from __future__ import annotations

import re
import socket
import subprocess

from servekit import edgepilot


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(edgepilot("serve", *args), capture_output=True, text=True, timeout=timeout)


def _one_line_error(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("edgepilot: error: ")
    for w in words:
        assert w in last, last


def test_public_host_without_key_is_refused(smollm_path):
    for host in ("0.0.0.0", "::"):
        proc = _run(str(smollm_path), "--host", host, "--port", "0")
        _one_line_error(proc, f"refusing to serve on {host} without an API key", "--api-key-file")
        assert len(proc.stderr.strip().splitlines()) == 1


def test_key_options_conflict_and_empty_key_file(smollm_path, tmp_path):
    key = tmp_path / "key"
    key.write_text("\n")
    _one_line_error(_run(str(smollm_path), "--api-key", "a", "--api-key-file", str(key)), "not both")
    _one_line_error(_run(str(smollm_path), "--api-key-file", str(key)), "is empty")
    _one_line_error(_run(str(smollm_path), "--api-key-file", str(tmp_path / "nope")), "not found")


def test_bad_port_missing_model_and_busy_port(smollm_path, tmp_path):
    _one_line_error(_run(str(smollm_path), "--port", "70000"), "not a TCP port")
    _one_line_error(_run(str(tmp_path / "missing.gguf"), "--port", "0"), "model file not found")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        _one_line_error(_run(str(smollm_path), "--port", str(port), "--ctx", "256"), f"port {port}", "in use")


def test_a_busy_port_is_found_before_the_model_is_read(smollm_path):
    """Before: serve planned, preloaded the model into the page cache ("preloading ..." on stderr) and only
    then found its port taken."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = _run(str(smollm_path), "--port", str(port), "--ctx", "256")
    _one_line_error(proc, f"port {port}", "in use")
    assert len(proc.stderr.strip().splitlines()) == 1 and "preload" not in proc.stderr, proc.stderr
    free = re.search(r"--port (\d+) is free now", proc.stderr)  # a value to paste, not "choose another"
    assert free and int(free.group(1)) != port, proc.stderr


def test_plan_that_does_not_fit_is_refused_with_the_plan(smollm_path):
    proc = _run(str(smollm_path), "--port", "0", "--budget", "120MiB", "--ctx", "8192")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "does not fit" in proc.stderr and "exceeds the budget" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_timeouts_must_be_real_positive_seconds(smollm_path):
    for value in ("nan", "inf", "0", "-1", "99999"):
        _one_line_error(_run(str(smollm_path), "--port", "0", "--header-timeout", value), "--header-timeout")
    _one_line_error(_run(str(smollm_path), "--port", "0", "--body-timeout", "nan"), "--body-timeout")


def test_the_psi_limit_default_is_the_planners():
    # serve_cmd keeps its own copy so that `edgepilot --help` does not import the planner
    from edgepilot.cli.serve_cmd import DEFAULT_SHORT_CTX as SHOWN_SHORT
    from edgepilot.cli.serve_cmd import PRESSURE_PSI as SHOWN
    from edgepilot.plan.budget import PRESSURE_PSI
    from edgepilot.serve.config import DEFAULT_SHORT_CTX

    assert SHOWN_SHORT == DEFAULT_SHORT_CTX

    assert SHOWN == PRESSURE_PSI


def test_the_cost_caps_are_bounded(smollm_path):
    _one_line_error(_run(str(smollm_path), "--port", "0", "--max-messages", "0"), "--max-messages")
    _one_line_error(_run(str(smollm_path), "--port", "0", "--max-prompt-chars", "-1"), "--max-prompt-chars")
    _one_line_error(_run(str(smollm_path), "--port", "0", "--max-prompt-tokens", "-5"), "--max-prompt-tokens")
    proc = _run(str(smollm_path), "--port", "0", "--max-prompt-tokens", "64", "--engine", "tools")
    _one_line_error(proc, "--max-prompt-tokens", "in-process engine")


def test_the_caps_are_shown_with_their_defaults():
    proc = subprocess.run(edgepilot("serve", "--help"), capture_output=True, text=True, timeout=60)
    text = " ".join(proc.stdout.split())
    for flag in ("--max-messages", "--max-prompt-chars", "--max-prompt-tokens"):
        assert flag in text
    assert "[default: 256]" in text
