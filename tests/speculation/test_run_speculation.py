"""Speculative decoding on llama-server (issue 42, the tools engine): `run --lookup` and `run --draft` give
the target's own greedy text and say how many drafted tokens it kept; a draft with another tokenizer, a
missing draft, a draft length out of range and two kinds at once are refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgepilot.engine.speculation import SpecStats, Speculation, speculation_args
from edgepilot.errors import UserError
from edgepilot.plan.settings import EngineSettings

TEXT = (
    "The quick brown fox jumps over the lazy dog near the river bank, while the farmer watches from his old "
    "wooden porch and the sun sets slowly behind the hills. Children run home from school, laughing, and the "
    "baker closes his shop after a long day of making bread for the whole village."
)
NEW = frozenset({"--spec-type", "-md", "-devd", "--spec-draft-n-max", "--spec-ngram-simple-size-m"})


def _run(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EDGEPILOT_DATA_DIR": str(data), "COLUMNS": "50"}
    argv = [sys.executable, "-m", "edgepilot", "run", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture(scope="module")
def rewrite(tmp_path_factory) -> Path:
    """A text to be written again: what n-gram lookup is for (the model copies the paragraph once more)."""
    path = tmp_path_factory.mktemp("prompt") / "rewrite.txt"
    path.write_text(f"{TEXT}\n\n{TEXT}\n\n")
    return path


def test_lookup_and_a_draft_keep_the_targets_greedy_text_and_say_what_they_kept(
    smollm_path, rewrite, tmp_path
):
    # 48 tokens: inside the copied paragraph (at its end, where the model may stop or go on, a verify batch's
    # numerics can tip the choice: that is llama.cpp's, not a token we pick)
    common = (str(smollm_path), "--raw", "--prompt-file", str(rewrite), "-n", "48", "--temp", "0", "--json")
    runs = {}
    for name, extra in {
        "plain": ("--engine", "tools"),
        "lookup": ("--lookup",),  # no engine named: speculation picks llama-server
        "draft": ("--draft", str(smollm_path), "--draft-max", "4"),
    }.items():
        done = _run(tmp_path, *common, *extra)
        assert done.returncode == 0, done.stderr[-3000:]
        runs[name] = json.loads(done.stdout)
    assert runs["plain"]["speculation"] is None and runs["plain"]["n_gen"] == 48
    for name in ("lookup", "draft"):
        got = runs[name]
        assert got["text"] == runs["plain"]["text"], (name, got["text"], runs["plain"]["text"])
        assert got["engine"]["kind"] == "tools"
        spec = got["speculation"]
        assert spec["kind"] == name and spec["drafted"] > 0 and 0 < spec["accepted"] <= spec["drafted"], spec
        assert spec["acceptance_rate"] == round(spec["accepted"] / spec["drafted"], 3)
        assert spec["tokens_per_step"] > 1.0, spec
    # the advice is llama.cpp's own command line, with the speculation in it
    assert "--spec-type" in runs["lookup"]["llama_cpp_args"]
    assert (
        "-md" in runs["draft"]["llama_cpp_args"] and "--spec-draft-n-max" in runs["draft"]["llama_cpp_args"]
    )
    # the same model as its own draft agrees with itself on every token it drafts
    assert runs["draft"]["speculation"]["acceptance_rate"] == 1.0


def test_the_summary_says_what_was_kept_at_50_columns(smollm_path, rewrite, tmp_path):
    done = _run(tmp_path, str(smollm_path), "--raw", "--prompt-file", str(rewrite), "-n", "24", "--temp", "0",
                "--lookup")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("lookup "))  # after the text
    assert "kept (" in line and "tok/step" in line and len(line) <= 50, line


@pytest.mark.parametrize(
    "args, said",
    [
        (("--draft", "GEMMA"), "cannot draft for SmolLM2-135M-Instruct.Q4_1.gguf: their tokenizers differ"),
        (("--lookup", "--draft", "GEMMA"), "give --lookup or --draft, not both"),
        (("--draft-max", "4"), "--draft-max goes with --lookup or --draft"),
        (("--lookup", "--draft-max", "0"), "--draft-max 0: give 1 to 64"),
        # llama.cpp's lookup drafts nothing shorter than its n-gram of 12 (found on the aarch64 lane)
        (("--lookup", "--draft-max", "8"), "--draft-max 8 with --lookup: llama.cpp's n-gram"),
        (("--draft", "/nonexistent/draft.gguf"), "not found"),
    ],
)
def test_what_cannot_speculate_is_refused_in_one_line(smollm_path, gemma_path, tmp_path, args, said):
    paths = {"GEMMA": str(gemma_path), "SMOLLM": str(smollm_path)}
    args = tuple(paths.get(a, a) for a in args)
    done = _run(tmp_path, str(smollm_path), "-n", "4", *args)
    assert done.returncode == 2, done.stderr[-2000:]
    assert said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) <= 3, done.stderr  # one line (wrapped at most)


def test_flags_are_spelled_as_the_installed_llama_server_takes_them():
    lookup, draft = Speculation("lookup", n_max=16), Speculation("draft", Path("d.gguf"), 4)
    size_m = ["--spec-ngram-simple-size-m", "16"]
    assert speculation_args(lookup, NEW) == ["--spec-type", "ngram-simple", *size_m]
    assert speculation_args(draft, NEW) == ["--spec-type", "draft-simple", "-md", "d.gguf", "-devd", "none",
                                            "--spec-draft-n-max", "4"]  # fmt: skip
    # an offloaded target's draft goes to its device with as many layers as the plan counts
    on_gpu = EngineSettings(n_ctx=512, n_threads=2, device="Vulkan0", n_gpu_layers=10)
    offloaded = speculation_args(draft, NEW | {"-ngld"}, on_gpu)
    assert offloaded == ["--spec-type", "draft-simple", "-md", "d.gguf", "-devd", "Vulkan0", "-ngld", "10",
                         "--spec-draft-n-max", "4"]  # fmt: skip
    older = frozenset({"-md", "--draft-max"})  # before --spec-type (2025)
    assert speculation_args(draft, older) == ["-md", "d.gguf", "--draft-max", "4"]
    with pytest.raises(UserError, match="no n-gram lookup"):
        speculation_args(lookup, older)
    with pytest.raises(UserError, match="takes no draft model"):
        speculation_args(draft, frozenset({"--spec-type"}))


def test_the_servers_counts_are_read_as_untrusted():
    assert SpecStats.from_timings("lookup", {"draft_n": 10, "draft_n_accepted": 7}, 20).to_json() == {
        "kind": "lookup", "drafted": 10, "accepted": 7, "acceptance_rate": 0.7, "tokens_per_step": 1.538,
    }  # fmt: skip
    for hostile in ({"draft_n": -3, "draft_n_accepted": 5}, {"draft_n": "9", "draft_n_accepted": 2},
                    {"draft_n": 4, "draft_n_accepted": 9}, {}):  # fmt: skip
        got = SpecStats.from_timings("draft", hostile, 10)
        assert 0 <= got.accepted <= got.drafted and got.accepted <= 10, (hostile, got)
    none = SpecStats.from_timings("draft", {}, 0)
    assert none.acceptance_rate is None and none.tokens_per_step is None


def test_a_run_with_a_draft_teaches_the_memory_calibration_nothing(smollm_path, tmp_path):
    # llama-server's peak with a draft holds two models: learnt as the target's, later plans over-count
    calibrations = tmp_path / "calibration"
    done = _run(tmp_path, str(smollm_path), "-n", "4", "--temp", "0", "--draft", str(smollm_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert not calibrations.exists() or not any(calibrations.iterdir())
    done = _run(tmp_path, str(smollm_path), "-n", "4", "--temp", "0", "--engine", "tools")
    assert done.returncode == 0, done.stderr[-2000:]
    assert any(calibrations.iterdir())  # the same run without the draft is learnt from


def test_with_sampling_the_acceptance_is_reported(smollm_path, tmp_path):
    # run's default --temp 0.8: llama-server accepts a drafted token where the target's sample agrees. The
    # prompt stops inside a third copy, so the sampled text is on the copy from its first token
    third = " ".join(TEXT.split()[:16])
    prompt = tmp_path / "third.txt"
    prompt.write_text(f"{TEXT}\n\n{TEXT}\n\n{third}")
    done = _run(tmp_path, str(smollm_path), "--raw", "--prompt-file", str(prompt), "-n", "48", "--seed", "7",
                "--lookup", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    spec = json.loads(done.stdout)["speculation"]
    assert spec["kind"] == "lookup" and spec["drafted"] > 0, spec
    assert spec["acceptance_rate"] is not None and 0 < spec["acceptance_rate"] <= 1, spec
