"""`rpc-server --dry-run` before any build: the command (with the path `edgepilot build` fills), where to get
the tool, and the no-auth warning, exit 0; `cluster plan` plans the shared default context."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from edgepilot.defaults import DEFAULT_CTX

EDGEPILOT = [sys.executable, "-m", "edgepilot"]


def no_tools_env(tmp_path) -> dict[str, str]:
    """An environment with no built tools and nothing of llama.cpp's on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python3")
    env = dict(os.environ, EDGEPILOT_TOOLS_DIR=str(tmp_path / "tools"), PATH=str(bin_dir))
    return env


def test_dry_run_without_a_build_shows_the_command_and_the_warning(tmp_path):
    env = no_tools_env(tmp_path)
    missing = subprocess.run(
        [*EDGEPILOT, "rpc-server", "--port", "50998"], capture_output=True, text=True, timeout=60, env=env
    )
    assert missing.returncode == 2 and "rpc-server" in missing.stderr  # a real run still needs the tool

    out = subprocess.run(
        [*EDGEPILOT, "rpc-server", "--host", "0.0.0.0", "--port", "50998", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    argv = out.stdout.split()
    assert argv[0] == str(tmp_path / "tools" / "native" / "bin" / "rpc-server")
    assert argv[1:] == ["--host", "0.0.0.0", "--port", "50998"]
    assert "NO authentication" in out.stderr and "ssh -N -L 50998:127.0.0.1:50998" in out.stderr
    assert "edgepilot build" in out.stderr and "Traceback" not in out.stderr


def test_cluster_plan_defaults_to_the_shared_context(cli_app, smollm_path):
    from click.testing import CliRunner

    args = ["cluster", "plan", str(smollm_path), "--json", "--helper", "127.0.0.1:50052=2GiB"]
    result = CliRunner().invoke(cli_app, args)
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["n_ctx"] == DEFAULT_CTX
    assert plan["main_command"][plan["main_command"].index("-c") + 1] == str(DEFAULT_CTX)
    help_text = CliRunner().invoke(cli_app, ["cluster", "plan", "--help"]).output
    assert f"default: {DEFAULT_CTX}" in help_text
