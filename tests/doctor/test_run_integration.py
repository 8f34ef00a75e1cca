"""`edgepilot run` calls the doctor itself when llama.cpp fails: top cause and fix on stderr, exit 2."""

from __future__ import annotations

from typer.testing import CliRunner

runner = CliRunner()


def test_run_on_a_truncated_model_prints_the_diagnosis(cli_app, tmp_path, smollm_path):
    broken = tmp_path / "smol-truncated.gguf"
    with smollm_path.open("rb") as src:
        broken.write_bytes(src.read(50_000_000))  # the header is intact, the last tensors are missing
    res = runner.invoke(
        cli_app, ["run", str(broken), "-p", "hi", "-n", "2", "--ctx", "512", "--threads", "2"]
    )
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.stdout == ""
    err = res.stderr
    assert "edgepilot: error: llama.cpp could not load" in err
    assert "edgepilot: doctor: model-corrupt" in err
    assert "truncated" in err  # the validation of the file, quoted as evidence
    assert f"fix: download {broken} again" in err
