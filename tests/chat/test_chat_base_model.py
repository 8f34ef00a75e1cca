"""The first chat: the bundled Gemma 3 270M is a base model (its GGUF has no tokenizer.chat_template), so
`edgepilot chat` says so once, with an instruct model to use; a model with a template gets no such line."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from edgepilot.cli import app
from edgepilot.gguf.gguf_header import read_header
from edgepilot.shown import shell_word

NOTE = "has no chat template (tokenizer.chat_template): it is a base model"


def _chat(*args: str, stdin: str):
    env = {**os.environ, "COLUMNS": "50"}
    return CliRunner().invoke(app, ["chat", *args, "--temp", "0", "-n", "8"], input=stdin, env=env)


def test_the_bundled_model_really_has_no_chat_template(gemma_path, smollm_path):
    assert "tokenizer.chat_template" not in read_header(gemma_path).metadata
    assert read_header(smollm_path).metadata.get("tokenizer.chat_template")


def test_chat_on_a_base_model_says_so_once_and_names_an_instruct_model(smollm_path):
    """Before: "What is the capital of France?" got a continuation, and nothing said why."""
    res = _chat(stdin="What is the capital of France?\nAnd of Italy?\n")  # the bundled model
    assert res.exit_code == 0, res.output
    said = " ".join(res.stderr.split())  # the note is wrapped at spaces for the 50 columns
    assert said.count(NOTE) == 1, res.stderr
    assert "note: gemma-3-270m-q4_k_m.gguf has no chat template" in said
    assert f"use an instruct model: `edgepilot chat {shell_word(str(smollm_path))}`" in said
    assert said.index(NOTE) < said.index("[prompt ")  # before the first answer
    data = json.loads(_chat("--json", stdin="Hi\n").stdout)
    assert sum(NOTE in n for n in data["notes"]) == 1


def test_chat_on_an_instruct_model_says_nothing_of_it(smollm_path):
    res = _chat(str(smollm_path), stdin="What is the capital of France?\n")
    assert res.exit_code == 0, res.output
    assert "chat template" not in res.stderr and "[prompt " in res.stderr
