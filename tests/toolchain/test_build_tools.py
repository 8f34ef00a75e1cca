"""The tools `edgepilot build` made: up to date, they run from their directory, they generate text."""

from __future__ import annotations

import os
import subprocess
import time

from click.testing import CliRunner

from edgepilot.engine.native_tools import TOOL_NAMES, find_tool

ENV = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}  # RPATH $ORIGIN must suffice


def test_second_build_is_up_to_date_and_instant(cli_app, native_build):
    started = time.monotonic()
    result = CliRunner().invoke(cli_app, ["build"])
    assert result.exit_code == 0, result.output
    assert "up to date" in result.stdout and "cmake -S " in result.stdout
    assert time.monotonic() - started < 10


def test_every_tool_runs_from_its_directory(native_build):
    for name in TOOL_NAMES:
        path = find_tool(name)
        assert str(path) == native_build.tools[name]
        done = subprocess.run([str(path), "--help"], capture_output=True, text=True, timeout=60, env=ENV)
        assert "error while loading shared libraries" not in done.stderr, done.stderr
        assert "usage" in (done.stdout + done.stderr).lower(), (name, done.stdout[-300:], done.stderr[-300:])
    version = subprocess.run(
        [str(find_tool("llama-completion")), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert version.returncode == 0 and "version" in version.stderr + version.stdout


def test_llama_completion_generates_what_the_engine_generates(native_build, smollm_path):
    """4 greedy tokens from the built llama-completion; the in-process engine (same commit) agrees."""
    from edgepilot.engine.inprocess import LlamaEngine
    from edgepilot.engine.sampling import SamplerSettings
    from edgepilot.plan.settings import EngineSettings

    prompt = "Count: one, two, three,"
    cmd = [str(find_tool("llama-completion")), "-m", str(smollm_path), "-p", prompt, "-n", "4", "--temp", "0"]
    cmd += ["-no-cnv", "--ignore-eos", "-t", "2", "-c", "256", "--no-warmup"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ENV)
    assert done.returncode == 0, done.stderr[-500:]
    assert (
        "eval time" in done.stderr and "/     3 runs" in done.stderr
    )  # 4 sampled, 3 decoded after the prompt
    assert done.stdout.startswith(prompt)
    cpp_text = done.stdout[len(prompt) :]
    with LlamaEngine(smollm_path, EngineSettings(n_ctx=256, n_threads=2)) as engine:
        pieces: list[str] = []
        engine.generate(
            engine.tokenize(prompt), 4, SamplerSettings(temperature=0), pieces.append, stop_at_eog=False
        )
    assert cpp_text.strip() and cpp_text.rstrip() == "".join(pieces).rstrip()


def test_llama_bench_measures(native_build, smollm_path):
    cmd = [str(find_tool("llama-bench")), "-m", str(smollm_path), "-p", "16", "-n", "4", "-t", "2", "-r", "1"]
    done = subprocess.run([*cmd, "-o", "json"], capture_output=True, text=True, timeout=300, env=ENV)
    assert done.returncode == 0, done.stderr[-500:]
    import json

    rows = json.loads(done.stdout)
    assert {r["n_prompt"] for r in rows} == {16, 0} and all(r["avg_ts"] > 0 for r in rows)
