"""`edgepilot run` calls the doctor itself when llama.cpp fails: top cause and fix on stderr, exit 2. Damage
the model verdict sees is refused before llama.cpp is asked (one line, exit 2)."""

from __future__ import annotations

from click.testing import CliRunner

runner = CliRunner()
RUN = ["-p", "hi", "-n", "2", "--ctx", "512", "--threads", "2"]


def test_run_on_a_model_llama_cpp_refuses_prints_the_diagnosis(cli_app, tmp_path, smollm_path):
    """A sound header whose tensors are not its architecture's: only llama.cpp's loader can tell."""
    broken = tmp_path / "smol-renamed.gguf"
    data = smollm_path.read_bytes()
    at = data.index(b"output_norm.weight")
    broken.write_bytes(data[:at] + b"output_norX.weight" + data[at + 18 :])  # same length: layout intact
    res = runner.invoke(cli_app, ["run", str(broken), *RUN])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.stdout == ""
    err = res.stderr
    assert "edgepilot: error: llama.cpp could not load" in err
    assert "edgepilot: doctor: model-corrupt" in err
    assert "tensor 'output_norm.weight' not found" in err  # llama.cpp's words, quoted as evidence
    assert "does not hold the tensors llama.cpp expects" in err


def test_run_on_a_truncated_model_is_refused_before_loading(cli_app, tmp_path, smollm_path):
    broken = tmp_path / "smol-truncated.gguf"
    with smollm_path.open("rb") as src:
        broken.write_bytes(src.read(50_000_000))  # the header is intact, the last tensors are missing
    res = runner.invoke(cli_app, ["run", str(broken), *RUN])
    assert res.exit_code == 2, res.output
    assert res.stdout == "" and "llama.cpp could not load" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "is damaged" in lines[0] and "incomplete" in lines[0]
    assert f"edgepilot inspect {broken}" in lines[0]
