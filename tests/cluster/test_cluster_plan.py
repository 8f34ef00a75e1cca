"""The cluster plan and the rpc-server command: llama.cpp's layer mapping, budgets, the commands printed, and
bad input (one line, exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from netkit import free_port, wait_listening

from edgepilot.cluster.split import assign, llama_split

MiB = 1 << 20
EDGEPILOT = [sys.executable, "-m", "edgepilot"]
DEVICES = Path(__file__).resolve().parents[1] / "devices"


def llama_cpp_assign(split: list[float], n_layer: int, n_gpu_layers: int | None = None) -> list[int]:
    """llama-model.cpp's own arithmetic (load_tensors), in float32 as it does it (upper_bound over normalized
    sums): layers 0..n_layer (output included) -> RPC device index, -1 for the main device's CPU."""
    sums = np.cumsum(np.array(split, dtype=np.float32), dtype=np.float32)
    splits = sums / np.float32(sums[-1])
    ngl = n_layer + 1 if n_gpu_layers is None else n_gpu_layers
    i_gpu_start = max(n_layer + 1 - ngl, 0)
    act = min(ngl, n_layer + 1)
    out = []
    for il in range(n_layer + 1):
        if il < i_gpu_start or il - i_gpu_start >= act:
            out.append(-1)
            continue
        x = np.float32(il - i_gpu_start) / np.float32(act)
        out.append(min(int(np.searchsorted(splits, x, side="right")), len(split) - 1))
    return out


@pytest.mark.parametrize("n_layer", [17, 24, 30, 61, 80])
def test_the_split_gives_each_device_exactly_its_layer_count(n_layer):
    rng = np.random.default_rng(n_layer)
    for _ in range(200):
        n_dev = int(rng.integers(2, 5))
        cuts = sorted(rng.choice(np.arange(1, n_layer + 1), n_dev - 1, replace=False))
        counts = np.diff([0, *cuts, n_layer + 1]).tolist()
        split = llama_split(counts)
        got = llama_cpp_assign(split, n_layer)
        assert [got.count(j) for j in range(n_dev)] == counts, (counts, split)
        assert got == assign(split, n_layer)


def test_plan_fits_the_sum_not_one_helper_and_prints_commands(cli_app, smollm_path):
    from click.testing import CliRunner

    args = ["cluster", "plan", str(smollm_path), "--ctx", "512", "--json", "--main-budget", "121MiB"]
    helpers = ["--helper", "127.0.0.1:50052=48MiB", "--helper", "10.0.0.7:50052=72MiB"]
    result = CliRunner().invoke(cli_app, args + helpers)
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["fits"] is True
    shares = plan["helpers"]
    assert [s["name"] for s in shares] == ["127.0.0.1:50052", "10.0.0.7:50052"]
    assert (
        shares[0]["first_layer"] == plan["main"]["end_layer"]
        and shares[-1]["end_layer"] == plan["n_layer"] + 1
    )
    assert all(s["predicted_peak_bytes"] <= s["budget_bytes"] for s in shares)
    main = plan["main_command"]
    assert main[main.index("--rpc") + 1] == "127.0.0.1:50052,10.0.0.7:50052"
    assert "--tensor-split" in main and main[main.index("-c") + 1] == "512"
    assert plan["helper_commands"][1][-2:] == ["--host", "10.0.0.7"]

    alone = CliRunner().invoke(cli_app, [*args, "--helper", "127.0.0.1:50052=72MiB"])
    assert alone.exit_code == 1 and json.loads(alone.output)["fits"] is False


def test_a_helper_given_as_a_device_tree_gets_that_devices_budget(cli_app, smollm_path):
    from click.testing import CliRunner

    root = DEVICES / "raspberry-pi5"
    args = ["cluster", "plan", str(smollm_path), "--json", "--helper", f"127.0.0.1:50052={root}"]
    result = CliRunner().invoke(cli_app, [*args, "--main-budget", "200MiB"])
    assert result.exit_code == 0, result.output
    share = json.loads(result.output)["helpers"][0]
    assert share["budget_bytes"] > 1 << 30 and share["end_layer"] == share["first_layer"] + 31


@pytest.mark.parametrize(
    "helper, message",
    [
        ("127.0.0.1=1GiB", "HOST:PORT=BUDGET"),
        ("127.0.0.1:99999=1GiB", "HOST:PORT=BUDGET"),
        ("127.0.0.1:50052", "HOST:PORT=BUDGET"),
        ("127.0.0.1:50052=lots", "lots"),
    ],
)
def test_bad_helper_is_one_line_exit_2(cli_app, smollm_path, helper, message):
    from click.testing import CliRunner

    result = CliRunner().invoke(cli_app, ["cluster", "plan", str(smollm_path), "--helper", helper])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_rpc_server_on_a_network_address_warns_and_offers_the_tunnel(rpc_server_tool):
    out = subprocess.run(
        [*EDGEPILOT, "rpc-server", "--host", "0.0.0.0", "--port", "50999", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "NO authentication" in out.stderr and "#25289" in out.stderr
    assert "ssh -N -L 50999:127.0.0.1:50999" in out.stderr
    # a helper lends its CPU: rpc-server would offer an installed GPU before it
    assert out.stdout.split()[1:] == ["--host", "0.0.0.0", "--port", "50999", "--device", "CPU"]
    quiet = subprocess.run(
        [*EDGEPILOT, "rpc-server", "--dry-run"], capture_output=True, text=True, timeout=60
    )
    assert quiet.returncode == 0 and "authentication" not in quiet.stderr
    assert quiet.stdout.split()[1:] == ["--host", "127.0.0.1", "--port", "50052", "--device", "CPU"]


def test_rpc_server_runs_on_loopback_by_default(rpc_server_tool, tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [*EDGEPILOT, "rpc-server", "--port", str(port), "--threads", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_listening(port, proc, timeout=30)
        listening = Path("/proc/net/tcp").read_text()
        assert f"0100007F:{port:04X}" in listening  # bound to 127.0.0.1, not 0.0.0.0
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.parametrize("flags", [["--port", "0"], ["--threads", "0"]])
def test_rpc_server_bad_input_is_one_line_exit_2(flags, rpc_server_tool):
    out = subprocess.run([*EDGEPILOT, "rpc-server", *flags], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_the_gemma_plan_from_issue_23_is_valid_and_a_plan_that_does_not_fit_exits_1(cli_app, gemma_path):
    from click.testing import CliRunner

    args = ["cluster", "plan", str(gemma_path), "--ctx", "1024", "--json"]
    args += ["--helper", "127.0.0.1:50001=120MiB", "--helper", "127.0.0.1:50002=420MiB"]
    result = CliRunner().invoke(cli_app, [*args, "--main-budget", "400MiB"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["fits"] and all(s["end_layer"] > s["first_layer"] for s in plan["helpers"])
    assert min(plan["tensor_split"]) > 0
    for s in [plan["main"], *plan["helpers"]]:
        assert s["predicted_peak_bytes"] <= s["budget_bytes"]
    main = plan["main_command"]
    split = [float(v) for v in main[main.index("--tensor-split") + 1].split(",")]
    got = llama_cpp_assign(split, plan["n_layer"], int(main[main.index("-ngl") + 1]))
    assert [got.count(j) for j in range(len(split))] == [
        s["end_layer"] - s["first_layer"] for s in plan["helpers"]
    ]

    short = CliRunner().invoke(cli_app, [*args, "--main-budget", "200MiB"])
    assert short.exit_code == 1
    found = json.loads(short.output)  # --json still prints the plan
    assert found["fits"] is False and found["suggestions"]
    assert "more for the main device" in found["suggestions"][0]
    human = CliRunner().invoke(cli_app, [a for a in args if a != "--json"] + ["--main-budget", "200MiB"])
    text = " ".join(human.output.split())
    assert human.exit_code == 1 and "DOES NOT FIT" in text and "the smallest change that would fit" in text
    # commands that would be killed are not printed as ready to run (before: all three were)
    assert "llama-server -m" not in text and "rpc-server --port" not in text and "no commands:" in text
    assert found["main_command"] and found["helper_commands"]  # the plan as planned, for scripts
