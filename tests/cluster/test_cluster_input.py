"""`cluster plan`'s input is checked before planning (issue 25): hostile budgets, a host with a ','
(llama.cpp's --rpc separator), a HOST:PORT given twice and more helpers than layers are one line and exit 2;
a helper left without layers is left out of --rpc and named (issue 23); a snapshot archive is a ROOT."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_cluster_plan import llama_cpp_assign

DEVICES = Path(__file__).resolve().parents[1] / "devices"
SMOLLM_LAYERS = 30
MAIN_BUDGET = "200MiB"  # SmolLM2 on a main device at ctx 4096 with a few layers of its own


def plan(cli_app, model: Path, *helpers: str, as_json: bool = False, main_budget: str = MAIN_BUDGET):
    args = ["cluster", "plan", str(model), "--main-budget", main_budget] + (["--json"] if as_json else [])
    for h in helpers:
        args += ["--helper", h]
    return CliRunner().invoke(cli_app, args)


def assert_one_line(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output, result.output
    for word in words:
        assert word in result.output, result.output


@pytest.mark.parametrize(
    "budget, word",
    [
        ("1e400", "too large"),
        ("0.1", "at least 1 MiB"),
        ("0.5B", "at least 1 MiB"),
        ("1e-30GiB", "at least 1 MiB"),
        ("1 2 3", "cannot read"),
        ("1000", "at least 1 MiB"),
        ("nan", "cannot read"),
    ],
)
def test_hostile_budgets_are_one_line(cli_app, smollm_path, budget, word):
    assert_one_line(plan(cli_app, smollm_path, f"127.0.0.1:50052={budget}"), "--helper 127.0.0.1:50052", word)


def test_budgets_in_a_real_subprocess_are_one_stderr_line(smollm_path):
    for budget in ("1e400", "1e-30GiB"):
        out = subprocess.run(
            [sys.executable, "-m", "edgepilot", "cluster", "plan", str(smollm_path)]
            + ["--helper", f"127.0.0.1:50052={budget}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr


@pytest.mark.parametrize("host", ["a,b", "127.0.0.1,10.0.0.2", "a b", "host\n", "", "x=y"])
def test_a_host_that_is_not_one_host_is_refused(cli_app, smollm_path, host):
    result = plan(cli_app, smollm_path, f"{host}:50052=1GiB")
    assert_one_line(result, "--helper")
    assert "--rpc" not in result.output


def test_host_names_and_bracketed_ipv6_are_hosts(cli_app, smollm_path):
    result = plan(
        cli_app,
        smollm_path,
        "[::1]:50052=64MiB",
        "phone-2.lan:50053=64MiB",
        as_json=True,
        main_budget="400MiB",
    )
    assert result.exit_code == 0, result.output
    main = json.loads(result.output)["main_command"]
    assert main[main.index("--rpc") + 1] == "[::1]:50052,phone-2.lan:50053"


def test_the_same_helper_twice_is_refused(cli_app, smollm_path):
    result = plan(cli_app, smollm_path, "10.0.0.7:50052=1GiB", "10.0.0.8:50052=1GiB", "10.0.0.7:50052=2GiB")
    assert_one_line(result, "10.0.0.7:50052", "twice")
    result = plan(cli_app, smollm_path, "Phone:50052=1GiB", "phone:50052=1GiB")
    assert_one_line(result, "twice")


def test_more_helpers_than_layers_is_one_line(cli_app, smollm_path):
    n = SMOLLM_LAYERS + 1  # the output layer is one more
    helpers = [f"127.0.0.1:{50000 + i}=1GiB" for i in range(n + 1)]
    assert_one_line(plan(cli_app, smollm_path, *helpers), f"{n + 1} helpers", f"at most {n}")


@pytest.mark.parametrize("budget", ["1GiB", "2MiB"])  # the model fits in a few; it fits in none
def test_as_many_helpers_as_layers_give_a_plan_llama_cpp_follows(cli_app, smollm_path, budget):
    n = SMOLLM_LAYERS + 1
    result = plan(cli_app, smollm_path, *[f"127.0.0.1:{50000 + i}={budget}" for i in range(n)], as_json=True)
    assert result.exit_code == (0 if budget == "1GiB" else 1), result.output
    found = json.loads(result.output)
    counts = [s["end_layer"] - s["first_layer"] for s in found["helpers"]]
    n_main = found["main"]["end_layer"]
    assert n_main + sum(counts) == n and min(counts) >= 1
    split = found["tensor_split"]
    assert min(split) > 0 and len(split) == len(counts)  # only the helpers that hold layers are in --rpc
    got = llama_cpp_assign(split, SMOLLM_LAYERS, found["n_gpu_layers"])
    assert got.count(-1) == n_main and [got.count(j) for j in range(len(counts))] == counts
    if budget == "1GiB":
        idle = found["left_out"]
        assert idle and any(", ".join(idle) in note for note in found["notes"])
        assert len(idle) + len(counts) == n
    else:
        assert found["fits"] is False and found["suggestions"]


def test_a_helper_with_no_layers_is_left_out_and_named(cli_app, smollm_path):
    result = plan(cli_app, smollm_path, "127.0.0.1:50052=1MiB", "127.0.0.1:50053=1GiB", as_json=True)
    found = json.loads(result.output)
    assert found["tensor_split"] == [SMOLLM_LAYERS + 1 - found["main"]["end_layer"]]
    assert found["main_command"][found["main_command"].index("--rpc") + 1] == "127.0.0.1:50053"
    assert found["left_out"] == ["127.0.0.1:50052"]
    assert "no layers for 127.0.0.1:50052" in found["notes"][0]


def test_a_snapshot_archive_is_a_root(cli_app, smollm_path, tmp_path):
    archive = tmp_path / "pi5.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(DEVICES / "raspberry-pi5", arcname=".")
    from_tree = plan(cli_app, smollm_path, f"127.0.0.1:50052={DEVICES / 'raspberry-pi5'}", as_json=True)
    from_archive = plan(cli_app, smollm_path, f"127.0.0.1:50052={archive}", as_json=True)
    assert from_archive.exit_code == 0, from_archive.output
    budget = json.loads(from_archive.output)["helpers"][0]["budget_bytes"]
    assert budget == json.loads(from_tree.output)["helpers"][0]["budget_bytes"] > 1 << 30
    assert_one_line(plan(cli_app, smollm_path, f"127.0.0.1:50052={tmp_path / 'none.tar.gz'}"), "--helper")


def test_the_help_names_what_root_may_be(cli_app):
    result = CliRunner().invoke(cli_app, ["cluster", "plan", "--help"])
    assert "snapshot .tar.gz" in " ".join(result.output.split())
