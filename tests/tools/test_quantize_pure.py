"""The requantization fit recommends for an Adreno's OpenCL kernels, run for real on Gemma 3 270M Q4_K_M:
the llama-quantize command fit prints (its output path moved to a scratch folder) and `edgepilot quantize
--to Q4_0 --pure` both give a file whose every matrix is Q4_0, which fit then finds fast on the Adreno."""

from __future__ import annotations

import json
import subprocess
from collections import Counter

from click.testing import CliRunner

from edgepilot.engine.child_env import llama_env
from edgepilot.gguf.gguf_header import read_header

ADRENO = "sd8gen3-xiaomi14"
runner = CliRunner()


def _matrix_types(path) -> Counter:
    return Counter(t.type_name for t in read_header(path).tensors if len([d for d in t.shape if d > 1]) >= 2)


def _opencl_fit(cli_app, model, tree) -> dict:
    res = runner.invoke(cli_app, ["fit", str(model), "--root", str(tree), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["opencl"]


def test_the_printed_llama_quantize_command_runs(cli_app, devices, gemma_path, llama_quantize_tool, tmp_path):
    argv = _opencl_fit(cli_app, gemma_path, devices / ADRENO)["llama_quantize_args"]
    out = tmp_path / "pure.gguf"
    argv = [str(llama_quantize_tool), *argv[1:4], str(out), *argv[5:]]  # the tool here; OUT in scratch
    done = subprocess.run(argv, capture_output=True, text=True, env=llama_env(True, argv[0]), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(_matrix_types(out)) == {"Q4_0"}


def test_edgepilot_quantize_pure_makes_it_fast_there(cli_app, devices, gemma_path, tmp_path):
    res = runner.invoke(
        cli_app,
        ["quantize", str(gemma_path), "--to", "Q4_0", "--pure", "--out", str(tmp_path), "-t", "2", "--json"],
    )
    assert res.exit_code == 0, res.output
    (variant,) = json.loads(res.stdout)["variants"]
    assert variant["path"] == str(tmp_path / "gemma-3-270m-Q4_0-pure.gguf")
    assert set(_matrix_types(variant["path"])) == {"Q4_0"}  # the output and embeddings too
    advice = _opencl_fit(cli_app, variant["path"], devices / ADRENO)
    assert advice["fast"] is True and advice["llama_quantize_args"] == []
