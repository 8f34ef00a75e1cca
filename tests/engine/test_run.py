"""`edgepilot run` end to end: real models, real llama.cpp."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from edgepilot.cli import app
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.plan.requested import RequestedSettings
from edgepilot.run.runner import run_model

GREEDY = SamplerSettings(temperature=0)
SMALL = RequestedSettings(n_ctx=512, n_threads=2)


def test_bundled_gemma_generates_text_and_reports_speeds():
    result = run_model(None, "What is the capital of France?", n_predict=16, requested=SMALL, sampler=GREEDY)
    assert result.model.endswith("gemma-3-270m-q4_k_m.gguf")
    assert not result.chat_template  # this Gemma 3 270M is the base model: no chat template to apply
    assert 0 < result.n_gen <= 16
    assert result.stopped_by == ("limit" if result.n_gen == 16 else "eog")
    assert result.text.strip()
    # which words depend on the CPU kernels llama.cpp picks here; greedy, they are the same every time
    again = run_model(None, "What is the capital of France?", n_predict=16, requested=SMALL, sampler=GREEDY)
    assert (again.text, again.n_gen) == (result.text, result.n_gen)
    assert result.n_prompt > 5
    assert result.prompt_tps > 0 and result.gen_tps > 0
    # Gemma 3 270M's weights alone are ~240 MiB; the process must have touched at least that much.
    assert result.peak_rss_bytes > 200 * 2**20
    assert result.settings.n_ctx == 512 and result.settings.n_threads == 2


def test_smollm2_runs_from_a_path(smollm_path):
    result = run_model(str(smollm_path), "Name a color.", n_predict=12, requested=SMALL, sampler=GREEDY)
    assert result.model == str(smollm_path)
    assert result.n_gen > 0 and result.text.strip()
    assert result.chat_template  # SmolLM2 ships a ChatML template


def test_greedy_is_deterministic(smollm_path):
    a = run_model(
        str(smollm_path), "Count: one, two,", n_predict=10, requested=SMALL, sampler=GREEDY, raw_prompt=True
    )
    b = run_model(
        str(smollm_path), "Count: one, two,", n_predict=10, requested=SMALL, sampler=GREEDY, raw_prompt=True
    )
    assert a.text == b.text and a.n_gen == b.n_gen == 10


def test_llama_log_is_captured_not_printed(smollm_path, capfd):
    result = run_model(str(smollm_path), "Hi", n_predict=2, requested=SMALL, sampler=GREEDY)
    out, err = capfd.readouterr()
    assert any("llama_model_loader" in line for line in result.llama_log)
    assert "llama_model_loader" not in err and "llama_model_loader" not in out


def test_generation_stops_at_the_context_limit(smollm_path):
    result = run_model(
        str(smollm_path),
        "Once upon a time " * 60,
        n_predict=200,
        requested=RequestedSettings(n_ctx=256, n_threads=2),
        sampler=GREEDY,
        raw_prompt=True,
    )
    assert result.n_prompt > 200
    assert result.n_prompt + result.n_gen == 256
    assert result.stopped_by == "context"


def test_quantized_kv_cache_turns_on_flash_attention(smollm_path):
    result = run_model(
        str(smollm_path),
        "Hi",
        n_predict=4,
        requested=RequestedSettings(n_ctx=256, type_k="q8_0", type_v="q8_0"),
    )
    assert result.settings.flash_attn is True
    assert "-ctv" in result.llama_cpp_args and "q8_0" in result.llama_cpp_args


def test_cli_json_has_the_design_keys(smollm_path):
    res = CliRunner().invoke(
        app, ["run", str(smollm_path), "-p", "Hello", "-n", "8", "--ctx", "256", "--temp", "0", "--json"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    for key in ("text", "n_prompt", "n_gen", "prompt_tps", "gen_tps", "settings", "peak_rss_bytes"):
        assert key in data
    assert data["n_gen"] > 0
    assert data["settings"]["n_ctx"] == 256
    assert "llama_log" not in data


def test_cli_streams_text_then_a_summary(smollm_path, tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Say hello.")
    res = CliRunner().invoke(
        app, ["run", str(smollm_path), "--prompt-file", str(prompt), "-n", "6", "--ctx", "256"]
    )
    assert res.exit_code == 0, res.output
    assert "generation" in res.stdout and "t/s" in res.stdout and "peak memory" in res.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "/nonexistent/model.gguf"], "model file not found"),
        (["run", "."], "is a directory"),
        (["run", "--kv", "q3_x"], "unknown KV cache type"),
        (["run", "--ctx", "4"], "too small"),
        (["run", "-n", "-3"], "-n -3: out of range (0 to"),
        (["run", "--threads", "0"], "between 1 and"),
        (["run", "-p", "x", "--prompt-file", "y"], "not both"),
        (["run", "--prompt-file", "/nonexistent/prompt.txt"], "prompt file not found"),
        (["run", "--kv", "q8_0", "--no-flash-attn"], "needs flash attention"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2
    assert message in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_not_a_gguf_file(tmp_path):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"<html>404 Not Found</html>")
    res = CliRunner().invoke(app, ["run", str(fake)])
    assert res.exit_code == 2 and "is not a GGUF model" in res.stderr


def test_empty_file(tmp_path):
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    res = CliRunner().invoke(app, ["inspect", str(empty)])
    assert res.exit_code == 2 and "empty or truncated" in res.stderr


def test_unreadable_file(tmp_path, monkeypatch):
    # Tests run as root in CI, where chmod 000 does not stop a read: simulate the EACCES the user would get.
    target = tmp_path / "locked.gguf"
    target.write_bytes(b"GGUF")
    real_open = os.open

    def deny(path, *a, **k):
        if os.fspath(path) == str(target):
            raise PermissionError(13, "Permission denied", str(target))
        return real_open(path, *a, **k)

    monkeypatch.setattr(os, "open", deny)
    res = CliRunner().invoke(app, ["run", str(target)])
    assert res.exit_code == 2 and "no permission to read" in res.stderr


def test_prompt_longer_than_context(smollm_path):
    # llama.cpp pads a 64-token context to 256 cells and clamps the batch to 64: both must be respected.
    res = CliRunner().invoke(
        app, ["run", str(smollm_path), "-p", "word " * 200, "--ctx", "64", "--raw", "-n", "4"]
    )
    assert res.exit_code == 0, res.stderr
    res = CliRunner().invoke(app, ["run", str(smollm_path), "-p", "word " * 400, "--ctx", "64", "--raw"])
    assert res.exit_code == 2 and "context holds 256" in res.stderr


def test_a_model_not_found_names_the_next_step(tmp_path, monkeypatch):
    """Before: only "model file not found". A store name gets its exact pull command; a bare file name the
    store's listing and pull; a path stays a path to fix."""
    monkeypatch.setenv("EDGEPILOT_MODELS_DIR", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)
    cases = [
        (
            "bartowski/SmolLM2-135M-GGUF:SmolLM2-135M-Q4_K_M.gguf",
            "`edgepilot pull bartowski/SmolLM2-135M-GGUF",
        ),
        ("nosuch.gguf", "`edgepilot models` lists the models you have; `edgepilot pull OWNER/REPO`"),
    ]
    for name, hint in cases:
        res = CliRunner().invoke(app, ["run", name])
        assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
        assert "model file not found" in res.stderr and hint in res.stderr, res.stderr
    res = CliRunner().invoke(app, ["run", "ORG/REPO:FILE.gguf"])
    assert "download it with `edgepilot pull ORG/REPO FILE.gguf`" in res.stderr
    res = CliRunner().invoke(app, ["run", str(tmp_path / "models" / "x.gguf")])
    assert res.exit_code == 2 and "pull" not in res.stderr and "model file not found" in res.stderr


@pytest.mark.parametrize("engine", ["inprocess", "tools"])
def test_a_run_that_makes_no_text_says_why(smollm_path, engine):
    """Before: "generation 0 tok" and nothing else (and llama-server's run of -n 0 showed the token it
    samples anyway)."""
    if engine == "tools":
        from nativekit import native_tool

        native_tool("llama-server")
    smollm = [str(smollm_path), "--engine", engine]
    res = CliRunner().invoke(app, ["run", *smollm, "-n", "0", "--ctx", "256", "--json"])
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["n_gen"] == 0 and data["text"] == ""
    assert any("-n 0 asks for none" in n for n in data["notes"]), data["notes"]
    # raw and greedy, SmolLM2's first token after a finished answer is its end-of-turn token
    done = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nHello! How can I help you today?"
    res = CliRunner().invoke(
        app, ["run", *smollm, "--raw", "-p", done, "-n", "8", "--temp", "0", "--ctx", "256"]
    )
    assert res.exit_code == 0, res.stderr
    assert "first token was end-of-generation" in " ".join(res.stdout.split()), res.stdout
    assert "try without --raw" in " ".join(res.stdout.split())


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--ctx", "4294967552", "--force"], "too large"),
        (["run", "--temp", "nan"], "--temp nan: not a finite number"),
        (["run", "--temp", "inf"], "not a finite number"),
        (["run", "--threads", "999"], "--threads 999 on a device with"),
        (["run", "-n", "-1"], "-n -1: out of range"),
        (["fit", "x.gguf", "--ubatch", "0"], "batch and ubatch"),
        (["serve", "--psi-limit", "nan"], "--psi-limit nan: not a finite number"),
        (["serve", "--port", "70000"], "--port 70000 is not a TCP port"),
    ],
)
def test_out_of_range_flags_are_one_line_and_exit_2(args, message, gemma_path, tmp_path):
    if args[0] == "fit":
        args = ["fit", str(gemma_path), *args[2:]]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert message in res.stderr and res.stderr.count("\n") == 1, res.stderr
