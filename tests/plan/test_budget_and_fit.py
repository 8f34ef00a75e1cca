"""Budgets from real device trees, and fit's choices on them (pure planning: no model is loaded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from edgepilot.cli import app
from edgepilot.plan.budget import ANDROID_MARGIN, LINUX_MARGIN, compute_budget, parse_size
from edgepilot.plan.fit import fit_model, read_device
from edgepilot.plan.requested import RequestedSettings

DEVICES = Path(__file__).resolve().parents[1] / "devices"
KIB = 1024
MIB = 1 << 20


@pytest.mark.parametrize(
    "text, value",
    [("512MiB", 512 * MIB), ("2GiB", 2 << 30), ("2G", 2 << 30), ("1.5GB", 1_500_000_000), ("4096", 4096)],
)
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["lots", "2XB", "-1G", "0"])
def test_parse_size_rejects(text):
    from edgepilot.errors import UserError

    with pytest.raises(UserError):
        parse_size(text)


def test_android_budget_keeps_a_large_margin():
    device = read_device(DEVICES / "sd8gen2-xiaomi13pro")
    budget = compute_budget(device.memory, device.android)
    total, available = 11627284 * KIB, 4896512 * KIB
    margin = max(ANDROID_MARGIN[0], int(total * ANDROID_MARGIN[1]))
    assert budget.available_bytes == available
    assert budget.margin_bytes == margin
    assert budget.budget_bytes == available - margin
    assert any("lmkd" in r for r in budget.reasons)
    assert any("zram" in r for r in budget.reasons)  # its 6 GiB zram is not counted


def test_board_budget_uses_the_linux_margin():
    device = read_device(DEVICES / "raspberry-pi5")
    budget = compute_budget(device.memory, device.android)
    assert device.android is None
    assert budget.margin_bytes == max(LINUX_MARGIN[0], int(8245504 * KIB * LINUX_MARGIN[1]))


def test_override_budget_has_no_margin():
    device = read_device(DEVICES / "pixel6a-tensor-g1")
    budget = compute_budget(device.memory, device.android, override=3 << 30)
    assert budget.budget_bytes == 3 << 30 and budget.margin_bytes == 0 and budget.source == "--budget"


def test_fit_threads_use_big_cores_only(gemma_path):
    # Snapdragon 8 Gen 2: 1 X3 + 2 A715 + 2 A710 + 3 A510 -> 5 threads, not 8.
    plan = fit_model(gemma_path, root=DEVICES / "sd8gen2-xiaomi13pro")
    assert plan.settings.n_threads == 5
    # RK3588: 4 A76 + 4 A55 -> 4 threads (the #7176 fix).
    assert fit_model(gemma_path, root=DEVICES / "rk3588-orangepi5plus").settings.n_threads == 4


def test_fit_counts_arm_repacking(gemma_path):
    # i8mm on the SD8G2 repacks Q8_0, Q5_K/Q6_K and Q4_K matmul weights; the x86 laptop only Q4_K.
    arm = fit_model(gemma_path, root=DEVICES / "sd8gen2-xiaomi13pro").memory
    x86 = fit_model(gemma_path, root=DEVICES / "x86-laptop-i7-1165g7").memory
    assert x86.repack_bytes == pytest.approx(12.66 * MIB, rel=0.01)
    assert arm.repack_bytes > x86.repack_bytes
    # a 32-bit userland gets no repacking at all
    assert fit_model(gemma_path, root=DEVICES / "redmi-note8-termux32").memory.repack_bytes == 0


def test_fit_picks_the_largest_context_within_budget(smollm_path):
    plan = fit_model(smollm_path, budget_bytes=250 * MIB)
    assert plan.fits and plan.settings.n_ctx == plan.max_ctx
    assert plan.memory.peak_rss_bytes <= 250 * MIB < plan.budget_bytes + 1
    assert 256 < plan.max_ctx < 8192
    s = plan.settings  # the search traded what it had to for context: the same settings hold no more
    same = RequestedSettings(plan.max_ctx + 256, s.n_batch, s.n_ubatch, s.type_k, s.type_v, s.flash_attn)
    bigger = fit_model(smollm_path, same, budget_bytes=250 * MIB)
    assert not bigger.fits
    assert any(a.kind == "smaller-context" and a.fits for a in bigger.alternatives)
    # left free, the ubatch shrinks until a context fits: a smaller ubatch touches less compute memory
    f16 = RequestedSettings(n_ctx=2048, type_k="f16", type_v="f16", flash_attn=False)
    assert fit_model(smollm_path, f16, budget_bytes=250 * MIB).settings.n_ubatch < 512


def test_fit_offers_kv_quantization_and_smaller_quants(gemma_path):
    f16 = RequestedSettings(n_ctx=32768, n_ubatch=512, type_k="f16", type_v="f16", flash_attn=False)
    plan = fit_model(gemma_path, f16, budget_bytes=450 * MIB)
    assert not plan.fits
    kinds = {a.kind for a in plan.alternatives}
    assert "smaller-context" in kinds and "kv-quant" in kinds
    tiny = fit_model(gemma_path, RequestedSettings(n_ctx=256), budget_bytes=340 * MIB)
    assert not tiny.fits and tiny.max_ctx == 0
    assert any(a.kind == "smaller-quant" and a.fits for a in tiny.alternatives)


def test_fit_cli_json_has_the_design_keys(smollm_path):
    res = CliRunner().invoke(app, ["fit", str(smollm_path), "--json", "--budget", "1GiB"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    for key in ("fits", "budget_bytes", "settings", "memory", "max_ctx", "llama_cpp_args", "alternatives"):
        assert key in data
    for key in ("n_ctx", "n_batch", "n_ubatch", "type_k", "type_v", "flash_attn", "use_mmap", "n_threads"):
        assert key in data["settings"]
    for key in ("weights_bytes", "repack_bytes", "kv_bytes", "compute_reserved_bytes", "output_bytes"):
        assert key in data["memory"]
    assert data["memory"]["peak_rss_bytes"] <= data["budget_bytes"]
    assert data["llama_cpp_args"][:2] == ["llama-cli", "-m"]


def test_fit_cli_table(smollm_path):
    res = CliRunner().invoke(
        app, ["fit", str(smollm_path), "--ctx", "4096", "--root", str(DEVICES / "pixel6a-tensor-g1")]
    )
    assert res.exit_code == 0, res.output
    assert "peak (RSS)" in res.stdout and "llama-cli -m" in res.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["fit", "{model}", "--budget", "lots"], "cannot read --budget"),
        (["fit", "{model}", "--kv", "q9"], "unknown KV cache type"),
        (["fit", "/nonexistent.gguf"], "model file not found"),
        (["fit", "{model}", "--root", "/nonexistent-root"], "no such file or directory"),
    ],
)
def test_fit_bad_input(args, message, smollm_path):
    res = CliRunner().invoke(app, [a.replace("{model}", str(smollm_path)) for a in args])
    assert res.exit_code == 2 and message in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_fit_reads_only_the_header_of_a_big_file(tmp_path, smollm_path):
    # A 6 GiB sparse file behind a real header: planning must not read the data.
    import time

    big = tmp_path / "big.gguf"
    data = smollm_path.read_bytes()
    with big.open("wb") as f:
        f.write(data)
        f.truncate(6 << 30)
    t0 = time.perf_counter()
    res = CliRunner().invoke(app, ["fit", str(big), "--json"])
    assert time.perf_counter() - t0 < 5  # generous; it takes ~0.1 s — the point is it does not read 6 GiB
    # trailing bytes after the data are a warning, not damage: the plan is made
    assert res.exit_code == 0, res.output


def test_run_refuses_what_would_be_killed(smollm_path):
    res = CliRunner().invoke(app, ["run", str(smollm_path), "-n", "4", "--budget", "150MiB"])
    assert res.exit_code == 2
    assert "exceeds the budget" in res.stderr and "does not fit" in res.stderr
    forced = CliRunner().invoke(
        app, ["run", str(smollm_path), "-n", "4", "--budget", "150MiB", "--force", "--ctx", "512"]
    )
    assert forced.exit_code == 0, forced.output


def test_a_small_cgroup_limit_binds_with_a_margin_scaled_to_it():
    from dataclasses import replace

    memory = read_device(DEVICES / "x86-laptop-i7-1165g7").memory
    limited = replace(memory, cgroup_limit_bytes=300 * MIB, cgroup_usage_bytes=20 * MIB)
    budget = compute_budget(limited, None)
    assert budget.source.startswith("cgroup limit")
    assert budget.available_bytes == 280 * MIB
    assert budget.margin_bytes == 30 * MIB  # 10 % of the limit, not 5 % of the laptop's 15 GiB
    assert budget.budget_bytes == 250 * MIB
