"""Limits said: a context above the model's trained one is a warning with the trained value and the GGUF's
RoPE-scaling facts, and a context llama.cpp rounds up is said, by fit, run and chat (serve: tests/serve)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from edgepilot.cli import app
from edgepilot.plan.fit import fit_model
from edgepilot.plan.requested import RequestedSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gguf"))
from synth import ARCHS, write_model  # noqa: E402

from gguf import RopeScalingType  # noqa: E402

ABOVE = (
    "ctx 100000 is above the 8192 tokens the model was trained on (its GGUF declares no RoPE scaling): past "
    "them its output can degrade; --ctx 8192 stays within it"
)
ROUNDED = "ctx 100000 is rounded up to 100096: llama.cpp makes it a multiple of 256"


def _cli(*args: str, stdin: str | None = None):
    return CliRunner().invoke(app, list(args), input=stdin, env={**os.environ, "COLUMNS": "50"})


def test_fit_warns_above_the_trained_context_and_of_the_rounding(smollm_path):
    """Before: `fit SmolLM2 --ctx 100000` planned 100000 "cells" without a word (llama.cpp makes 100096)."""
    data = json.loads(_cli("fit", str(smollm_path), "--ctx", "100000", "--json").stdout)
    assert data["warnings"] == [ABOVE, ROUNDED]
    table = _cli("fit", str(smollm_path), "--ctx", "100000")
    assert table.exit_code == 0, table.output
    said = " ".join(table.stdout.split())
    assert f"warning: {ABOVE}" in said and f"warning: {ROUNDED}" in said
    assert "100096 cells" in said
    assert said.count("is above the 8192 tokens") == 1  # not again among the notes


@pytest.mark.parametrize(
    "ctx, warnings", [(8192, []), (4096, []), (1000, ["ctx 1000 is rounded up to 1024"])]
)
def test_within_the_trained_context_only_a_rounding_is_said(smollm_path, ctx, warnings):
    plan = fit_model(smollm_path, RequestedSettings(n_ctx=ctx), budget_bytes=4 << 30)
    assert [w.split(":")[0] for w in plan.warnings] == warnings
    assert fit_model(smollm_path, budget_bytes=4 << 30).warnings == []  # a context the planner chose


def test_the_ggufs_rope_scaling_facts_are_said(tmp_path):
    def yarn(w) -> None:
        w.add_rope_scaling_type(RopeScalingType.YARN)
        w.add_rope_scaling_factor(4.0)
        w.add_rope_scaling_orig_ctx_len(8192)

    model = write_model(tmp_path / "yarn.gguf", {**ARCHS["smollm2"], "context_length": 32768}, extra=yarn)
    plan = fit_model(model, RequestedSettings(n_ctx=65536), budget_bytes=64 << 30)
    assert plan.warnings == [
        "ctx 65536 is above the 32768 tokens the model was trained on (its GGUF declares RoPE scaling yarn "
        "factor 4 from an original context of 8192): past them its output can degrade; --ctx 32768 stays "
        "within it"
    ]


def test_run_says_it_before_the_model_loads(smollm_path):
    """A real run at ctx 8300 (trained on 8192): the warnings come before the text, once."""
    res = _cli("run", str(smollm_path), "--ctx", "8300", "-n", "2", "-p", "Hi", "--temp", "0", "--no-preload")
    assert res.exit_code == 0, res.output
    err = " ".join(res.stderr.split())
    assert err.count("warning: ctx 8300 is above the 8192 tokens the model was trained on") == 1
    assert err.count("warning: ctx 8300 is rounded up to 8448") == 1
    both = " ".join(res.output.split())  # stdout and stderr as they came
    assert both.index("warning: ctx 8300 is rounded") < both.index("first token")
    assert "ctx 8448" in both  # the summary: what llama.cpp made
    for line in res.stderr.splitlines():
        assert len(line) <= 50, line
    data = json.loads(_cli("run", str(smollm_path), "--ctx", "8300", "-n", "1", "-p", "Hi", "--json").stdout)
    assert [w.split(":")[0] for w in data["warnings"]] == [
        "ctx 8300 is above the 8192 tokens the model was trained on (its GGUF declares no RoPE scaling)",
        "ctx 8300 is rounded up to 8448",
    ]


def test_chat_says_it_once(smollm_path):
    res = _cli("chat", str(smollm_path), "--ctx", "8300", "-n", "4", "--temp", "0", stdin="Hi\nBye\n")
    assert res.exit_code == 0, res.output
    err = " ".join(res.stderr.split())
    assert err.count("warning: ctx 8300 is above the 8192 tokens") == 1
    assert err.count("warning: ctx 8300 is rounded up to 8448") == 1


def test_the_largest_context_says_it_stops_at_the_trained_one(smollm_path):
    """issue 31 review: 'fits at ctx 100000', then 'largest context that fits: 8192': a contradiction."""
    data = json.loads(_cli("fit", str(smollm_path), "--ctx", "100000", "--json").stdout)
    assert data["fits"] and data["max_ctx"] == data["n_ctx_train"] == 8192
    said = " ".join(_cli("fit", str(smollm_path), "--ctx", "100000").stdout.split())
    assert "largest context that fits: 8192 (the model's trained context: the search goes no higher)" in said
    small = " ".join(_cli("fit", str(smollm_path), "--budget", "200MiB").stdout.split())
    assert "largest context that fits:" in small and "trained context: the search" not in small
