"""Page-cache preload before the first request, and time to first token, on the real SmolLM2 model."""

from __future__ import annotations

import json

from click.testing import CliRunner

from edgepilot.engine.preload import preload
from edgepilot.run.runner import run_model


def test_run_json_reports_ttft_and_the_preload(cli_app, smollm_path):
    res = CliRunner().invoke(
        cli_app, ["run", str(smollm_path), "-n", "4", "--temp", "0", "--ctx", "512", "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["ttft_ms"] > 0
    assert out["ttft_ms"] >= out["prompt_seconds"] * 1000  # the first token comes after the prompt
    assert out["preload"]["bytes_read"] == out["preload"]["file_bytes"] == smollm_path.stat().st_size
    assert out["preload"]["complete"] is True and out["preload_skipped"] is None


def test_no_preload_is_honoured(cli_app, smollm_path):
    args = ["run", str(smollm_path), "-n", "2", "--temp", "0", "--ctx", "512"]
    warm = CliRunner().invoke(cli_app, args)
    assert warm.exit_code == 0, warm.output
    assert "preloaded 93.8 MiB into the page cache" in warm.stderr
    assert "first token" in warm.stdout
    cold = CliRunner().invoke(cli_app, [*args, "--no-preload"])
    assert cold.exit_code == 0, cold.output
    assert "preload" not in cold.stderr and "first token" in cold.stdout


def test_a_model_over_the_budget_is_not_preloaded(smollm_path):
    result = run_model(str(smollm_path), "Hi", n_predict=1, force=True, budget_bytes=64 << 20)
    assert result.plan is not None and not result.plan.fits
    assert result.preload is None and "does not fit" in (result.preload_skipped or "")


def test_preload_reads_the_whole_file_and_stops_at_its_time_limit(smollm_path):
    seen: list[int] = []
    done = preload(smollm_path, lambda n, total: seen.append(n))
    assert done.complete and done.bytes_read == smollm_path.stat().st_size == seen[-1]
    assert seen == sorted(seen)
    cut = preload(smollm_path, max_seconds=0.0)
    assert not cut.complete and 0 < cut.bytes_read < smollm_path.stat().st_size
