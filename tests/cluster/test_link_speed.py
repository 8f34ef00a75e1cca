"""Speed over a link: `--link` input, the traffic the model predicts against the bytes a real split sends,
and predicted vs measured generation t/s of SmolLM2 on a real rpc-server helper behind the relay, per link
profile (within 20 %), with the plan's verdict (pool or one device) matching the measured faster one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from linkbench import N_GEN, pool, single

from edgepilot.cluster.link import PROFILES, Link, parse_link
from edgepilot.cluster.speed import F32, layer_bytes, predict
from edgepilot.cluster.split import tensors_by_layer
from edgepilot.errors import UserError
from edgepilot.plan.fit import load_model_facts

EDGEPILOT = [sys.executable, "-m", "edgepilot"]
N_CTX = 1024


def test_link_reads_latency_rate_and_profiles():
    assert parse_link("10ms,50Mbit") == Link(0.010, 50e6)
    assert parse_link(" 500us , 1.5 Gbit ") == Link(0.0005, 1.5e9)
    assert parse_link("POOR-WIFI") == PROFILES["poor-wifi"] == Link(0.030, 10e6)
    assert parse_link("0s,100Kbit") == Link(0.0, 1e5)
    for bad in (
        "10ms",
        "10,50Mbit",
        "10ms,50MB",
        "50Mbit,10ms",
        "1e9ms,1Mbit",
        "11s,1Mbit",
        "1ms,0Mbit",
        "x" * 99,
    ):
        with pytest.raises(UserError):
            parse_link(bad)


@pytest.mark.parametrize(
    "flags",
    [
        ["--link", "10ms"],
        ["--link", "wifi", "--speed", "0"],
        ["--speed", "10,50"],
        ["--link", "wifi", "--speed", "fast"],
    ],
)
def test_bad_link_or_speed_is_one_line_exit_2(smollm_path, flags):
    cmd = [*EDGEPILOT, "cluster", "plan", str(smollm_path), "--helper", "127.0.0.1:50052=200MiB", *flags]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "--link" in out.stderr or "--speed" in out.stderr


def test_plan_with_a_link_prints_both_figures_side_by_side(smollm_path):
    base = [*EDGEPILOT, "cluster", "plan", str(smollm_path), "--ctx", "1024"]
    base += ["--helper", "127.0.0.1:50052=200MiB", "--link", "wifi", "--speed", "50,100"]
    out = subprocess.run([*base, "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    link = json.loads(out.stdout)["link"]
    pool, alone = link["pool"], link["single"]
    assert pool["link"] == "10ms,50Mbit" and pool["round_trips_per_token"] == 1
    # SmolLM2 fits on this device alone, which no link can beat: the plan says the pool is slower
    assert alone["description"] == "the same model on the main device alone" and alone["gen_tps"] == 50
    assert 0 < pool["gen_tps"] < 50 and link["pool_is_faster"] is False
    text = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert "SLOWER" in text.stdout and "10ms,50Mbit" in text.stdout and "50.0 t/s" in text.stdout


def _predict(model, link: Link, gen: float, prompt: float, n_prompt: int):
    _, header, arch = load_model_facts(model)
    weights = layer_bytes(tensors_by_layer(header, arch.n_layer))
    shares = [("helper", 0, arch.n_layer + 1)]
    return arch, predict(arch, weights, shares, link, gen, prompt, N_CTX, n_prompt=n_prompt, n_gen=N_GEN)


def test_predicted_speed_over_three_links_follows_the_measured(
    smollm_path, rpc_server_tool, llama_server_tool
):
    with single(llama_server_tool, smollm_path, N_CTX) as s:
        s.measure(8)
        gen1, prompt1, n_prompt = s.measure(reps=3)
    results = {}
    with pool(rpc_server_tool, llama_server_tool, smollm_path, [1.0], N_CTX) as p:
        p.server.measure(8)  # every graph shape sent once
        relay = p.relays[0]
        for name, link in PROFILES.items():
            p.set_link(link)
            before = relay.counted()
            gen, prompt, _ = p.server.measure(reps=2)
            after = relay.counted()
            arch, pred = _predict(smollm_path, link, gen1, prompt1, n_prompt)
            results[name] = (pred.gen_tps, gen, pred.prompt_tps, prompt)
            # the helper holds the output layer: each generated token brings its logits back
            down_per_token = (after["down"] - before["down"]) / (2 * N_GEN)
            assert pred.boundaries[0].down_bytes_per_token == arch.n_vocab * F32
            assert down_per_token == pytest.approx(arch.n_vocab * F32, rel=0.05)
    # The 20 % figure is the benchmark's (benchmarks/link_speed.py, alternating rounds on a quiet machine);
    # here, on a machine other tests may be loading, only a gross error in the model fails.
    for name, (pred_gen, gen, pred_prompt, prompt) in results.items():
        assert pred_gen == pytest.approx(gen, rel=0.5), (name, results, gen1, prompt1)
        assert pred_prompt == pytest.approx(prompt, rel=0.5), (name, results, gen1, prompt1)
        # the verdict: the plan says the pool is slower exactly when it measured slower
        assert (pred_gen > gen1) == (gen > gen1), (name, results, gen1)


def test_the_single_device_alternative_comes_from_fits_planner(smollm_path):
    from edgepilot.cluster.link_plan import link_verdict

    shares = [("127.0.0.1:50052", 0, 31)]

    def verdict(budget_mib: int):
        return link_verdict(
            str(smollm_path), shares, N_CTX, "f16", PROFILES["usb"], (50.0, 100.0), budget_mib << 20
        )

    smaller = verdict(177)  # Q4_1 does not fit in 177 MiB; a smaller quantization does, and runs faster
    assert smaller.single is not None and "quantization" in smaller.single.description
    assert smaller.single.gen_tps > 50 and smaller.single.peak_rss_bytes <= 177 << 20
    assert not smaller.pool_is_faster and "SLOWER" in smaller.summary
    nothing = verdict(60)  # nothing fits on the main device: the pool is the only way
    assert nothing.single is None and nothing.pool_is_faster
    assert "nothing fits on the main device alone" in nothing.summary
