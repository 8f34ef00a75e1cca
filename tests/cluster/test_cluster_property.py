"""Issue 23: every cluster plan printed is valid, for any budgets, on every model the tests have.

Valid: each listed helper holds >= 1 layer or is left out of --rpc with a note; every --tensor-split share
is positive; llama.cpp's own mapping (float32, as llama-model.cpp computes it) of the printed
--tensor-split and -ngl gives each device exactly the layers the plan says; and the plan fits exactly when
every device's predicted peak (the main device's included) is within its budget. Pure arithmetic: each
model's header is read once."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from test_cluster_plan import llama_cpp_assign

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gguf"))
from synth import ARCHS, TensorSpec, write_model  # noqa: E402

from edgepilot.cluster.plan import Helper, plan_cluster  # noqa: E402
from edgepilot.plan.planner import load_model_facts, read_device  # noqa: E402

MiB = 1 << 20
N_SETS = 1000
CTXS = [256, 512, 1024, 2048]
KVS = ["f16", "q8_0"]


def synthetic_model(path: Path) -> Path:
    """Shapes none of the real models has: 9 layers of unequal size (types alternate), untied output,
    n_embd 256, GQA 8/2 heads of 32, a 4,000-token vocabulary."""
    hp = dict(ARCHS["qwen2"], block_count=9, embedding_length=256, feed_forward_length=768, head_count=8)
    hp |= {"head_count_kv": 2, "vocab_size": 4000, "context_length": 4096}
    tensors = [TensorSpec("token_embd.weight", (256, 4000), "Q4_K")]
    for il in range(9):
        big = ["Q8_0", "Q6_K", "Q4_K"][il % 3]
        tensors += [
            TensorSpec(f"blk.{il}.attn_norm.weight", (256,), "F32"),
            TensorSpec(f"blk.{il}.attn_q.weight", (256, 256), "Q4_K"),
            TensorSpec(f"blk.{il}.attn_k.weight", (256, 64), "Q4_K"),
            TensorSpec(f"blk.{il}.attn_v.weight", (256, 64), big),
            TensorSpec(f"blk.{il}.attn_output.weight", (256, 256), "Q4_K"),
            TensorSpec(f"blk.{il}.ffn_norm.weight", (256,), "F32"),
            TensorSpec(f"blk.{il}.ffn_gate.weight", (256, 768 * (1 + il % 2)), big),
            TensorSpec(f"blk.{il}.ffn_up.weight", (256, 768), "Q4_K"),
            TensorSpec(f"blk.{il}.ffn_down.weight", (768, 256), big),
        ]
    tensors += [
        TensorSpec("output_norm.weight", (256,), "F32"),
        TensorSpec("output.weight", (256, 4000), "Q6_K"),
    ]
    return write_model(path, hp, tensors)


@pytest.fixture(scope="module")
def models(smollm_path, gemma_path, model_7b_file, tmp_path_factory):
    synthetic = synthetic_model(tmp_path_factory.mktemp("synthetic") / "synthetic-9l.gguf")
    return {
        "smollm2": smollm_path,
        "gemma3": gemma_path,
        "7b": model_7b_file,
        "synthetic": synthetic,
    }


def check_valid(plan, listed: list[Helper], main_budget: int) -> None:
    n_layer = plan.n_layer
    names = [h.endpoint for h in listed]
    held = [s.name for s in plan.helpers]
    assert [n for n in names if n in held] == held  # --rpc order kept
    assert sorted(held + plan.left_out) == sorted(names)
    if plan.left_out:
        assert any(all(n in note for n in plan.left_out) for note in plan.notes), plan.notes
    assert all(s.n_layers >= 1 for s in plan.helpers)

    cmd = plan.main_command
    rpc = cmd[cmd.index("--rpc") + 1].split(",")
    split = [float(v) for v in cmd[cmd.index("--tensor-split") + 1].split(",")]
    ngl = int(cmd[cmd.index("-ngl") + 1])
    assert rpc == held and len(split) == len(rpc) and all(v > 0 for v in split)
    ours = plan.edgepilot_command
    assert ours[ours.index("--tensor-split") + 1] == cmd[cmd.index("--tensor-split") + 1]
    assert int(ours[ours.index("--gpu-layers") + 1]) == ngl if "--gpu-layers" in ours else ngl == n_layer + 1

    expected = [-1] * plan.main.n_layers
    for j, s in enumerate(plan.helpers):
        assert s.first_layer == len(expected)
        expected += [j] * s.n_layers
    assert len(expected) == n_layer + 1
    assert llama_cpp_assign(split, n_layer, ngl) == expected

    devices = [plan.main, *plan.helpers]
    assert plan.main.budget_bytes == main_budget
    assert plan.fits == all(d.predicted_peak_bytes <= d.budget_bytes for d in devices)


@pytest.mark.parametrize("name", ["smollm2", "gemma3", "7b", "synthetic"])
def test_every_plan_is_valid_for_random_budgets(models, name):
    path = models[name]
    facts = load_model_facts(path)
    device = read_device("/")
    n_layer = facts[2].n_layer
    rng = np.random.default_rng(23)
    # the scale of this model: one helper holding all of it, and the main device holding all it can
    whole = plan_cluster(
        str(path),
        [Helper("127.0.0.1", 1, 1 << 50)],
        512,
        main_budget=1 << 50,
        facts=facts,
        device=device,
        suggest=False,
    )
    scale = whole.helpers[0].predicted_peak_bytes + whole.main.predicted_peak_bytes
    fitting = 0
    for _ in range(N_SETS):
        n_helpers = int(rng.integers(1, min(6, n_layer + 1) + 1))
        budgets = [int(scale * rng.uniform(0.01, 1.2)) + MiB for _ in range(n_helpers)]
        main_budget = int(scale * rng.uniform(0.05, 1.5)) + MiB
        helpers = [Helper("127.0.0.1", 50000 + i, b) for i, b in enumerate(budgets)]
        ctx, kv = CTXS[int(rng.integers(len(CTXS)))], KVS[int(rng.integers(len(KVS)))]
        plan = plan_cluster(
            str(path), helpers, ctx, kv, main_budget=main_budget, facts=facts, device=device, suggest=False
        )
        check_valid(plan, helpers, main_budget)
        fitting += plan.fits
    print(f"{name}: {fitting} of {N_SETS} budget sets fit")
    assert 0.1 * N_SETS < fitting < 0.9 * N_SETS  # both kinds of plan were exercised
