"""The crash-isolated GPU driver check (engine/gpu_check.py) against stand-in programs that crash, hang,
fail, flood or pass: the driver's fate is a verdict, never edgepilot's; hangs die with their process group;
results are remembered per program, device and driver files."""

from __future__ import annotations

import os
import signal
import time

import pytest
from gpukit import calls, fake_tools

from edgepilot.device.gpu_llama import LlamaDevice
from edgepilot.engine import gpu_cache, gpu_check
from edgepilot.engine.gpu_run import parse_device_line, parse_facts, run_bounded

DEVICE = LlamaDevice("Vulkan0", "Mali-G77 MC9", "vulkan", 7245 << 20, 5120 << 20)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path / "data"))


def run_check(tmp_path, mode, deadline=30.0, **kw):
    server = fake_tools(tmp_path / "bin", mode)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    return server, gpu_check.check(server, DEVICE, deadline, model, **kw)


def test_a_driver_that_segfaults_is_a_verdict_with_its_signal(tmp_path):
    _, got = run_check(tmp_path, "segv")
    assert (got.ok, got.outcome, got.signal) == (False, "crashed", "SIGSEGV")
    assert got.detail == "the Vulkan driver crashed during the check: SIGSEGV"
    assert got.facts["device"]["uma"] is True and got.facts["device"]["warp_size"] == 16
    assert "load_tensors: loading model" in got.evidence
    assert got.tool.endswith("/llama-bench")


def test_an_abort_is_a_crash_too(tmp_path):
    _, got = run_check(tmp_path, "abort")
    assert (got.outcome, got.signal) == ("crashed", "SIGABRT")


def test_a_hang_is_killed_with_its_whole_process_group_at_the_deadline(tmp_path):
    start = time.monotonic()
    _, got = run_check(tmp_path, "hang", deadline=1.5)
    assert time.monotonic() - start < 20
    assert (got.ok, got.outcome) == (False, "hung") and "no end after 1.5 s" in got.detail
    pid = int((tmp_path / "bin" / "grandchild.pid").read_text())
    assert not _alive(pid), "the hung check's own child survived"


def _alive(pid: int) -> bool:
    for _ in range(50):
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.1)
    return True


def test_an_error_exit_says_the_last_error_line(tmp_path):
    _, got = run_check(tmp_path, "fail")
    assert (got.ok, got.outcome, got.exit_code) == (False, "failed", 1)
    assert got.detail.startswith("the check's Vulkan run exited with status 1: llama_model_load: error")


def test_a_flood_of_output_is_read_in_bounded_pieces(tmp_path):
    _, got = run_check(tmp_path, "flood")
    assert got.outcome == "crashed"
    assert all(len(line) <= 1000 for line in got.evidence)


def test_a_passing_check_reads_the_device_line_and_buffers(tmp_path):
    _, got = run_check(tmp_path, "ok")
    assert (got.ok, got.outcome, got.signal, got.evidence) == (True, "ok", None, [])
    assert got.facts["buffers"] == {"Vulkan0 model": round(3.81 * (1 << 20)), "Vulkan0 KV": 1 << 18}
    assert got.facts["device"]["name"] == "Mali-G77 MC9" and got.facts["device"]["driver"] == "Mali-G77"


def test_the_check_is_remembered_and_not_run_again(tmp_path):
    server, first = run_check(tmp_path, "segv")
    second = gpu_check.check(server, DEVICE, 30.0, tmp_path / "model.gguf")
    assert calls(tmp_path / "bin") == 1
    assert (first.cached, second.cached) == (False, True) and second.signal == "SIGSEGV"
    assert gpu_check.cached_check(server, "Vulkan0").outcome == "crashed"
    assert [c.device for c in gpu_check.cached_checks()] == ["Vulkan0"]
    assert gpu_cache.cache_path().is_file()
    gpu_check.check(server, DEVICE, 30.0, tmp_path / "model.gguf", fresh=True)
    assert calls(tmp_path / "bin") == 2


def test_another_loader_environment_is_another_check(tmp_path, monkeypatch):
    server, _ = run_check(tmp_path, "segv")
    monkeypatch.setenv("VK_INSTANCE_LAYERS", "VK_LAYER_something")
    assert gpu_check.cached_check(server, DEVICE) is None


def test_a_failed_check_keeps_the_driver_out_of_later_runs(tmp_path):
    server, _ = run_check(tmp_path, "segv")
    env = gpu_check.run_env(server)
    assert env == gpu_check.driver_kept_out_env()
    assert env["VK_LOADER_DRIVERS_DISABLE"] == "*" and env["GGML_VK_VISIBLE_DEVICES"] == ""
    assert not os.path.exists(env["VK_DRIVER_FILES"])


def test_a_passing_check_keeps_nothing_out(tmp_path):
    server, _ = run_check(tmp_path, "ok")
    assert gpu_check.run_env(server) == {} and gpu_check.failed_checks(server) == []


def test_every_cpu_run_keeps_the_drivers_out_a_gpu_run_does_not(tmp_path):
    """Not only after a failed check: with drivers installed, a CPU run's plan and peak are the same as
    without them (issue 40: 382 MiB against 318 MiB with Debian's lavapipe loaded)."""
    from edgepilot.engine.child_env import llama_env

    server, _ = run_check(tmp_path, "ok")
    for tool in (server, None):
        env = llama_env(True, tool, base={"VK_DRIVER_FILES": "/usr/share/vulkan/icd.d/lvp_icd.json"})
        assert {k: env.get(k) for k in gpu_check.KEEP_OUT_ENV} == gpu_check.driver_kept_out_env()
    gpu = llama_env(False, server, base={"VK_DRIVER_FILES": "/x.json"})
    assert gpu["VK_DRIVER_FILES"] == "/x.json" and "VK_LOADER_DRIVERS_DISABLE" not in gpu


def test_no_check_program_or_model_is_not_run(tmp_path):
    lonely = tmp_path / "alone" / "llama-server"
    lonely.parent.mkdir()
    lonely.write_text("#!/bin/sh\n")
    lonely.chmod(0o755)
    got = gpu_check.check(lonely, DEVICE, 5.0, tmp_path / "m.gguf")
    assert (got.ok, got.outcome) == (None, "not-run") and "llama-bench" in got.detail


def test_a_program_that_cannot_start_is_not_a_crash(tmp_path):
    got = run_bounded([str(tmp_path / "missing")], 5.0)
    assert got.start_error and got.signal is None and got.returncode is None


def test_a_wrapper_reports_its_childs_signal_as_128_plus_n(tmp_path):
    got = run_bounded(["sh", "-c", f"sh -c 'kill -SEGV $$'; exit {128 + signal.SIGSEGV}"], 10.0)
    assert got.signal == "SIGSEGV"
    plain = run_bounded(["sh", "-c", "exit 130"], 10.0)  # 128 + SIGINT: a user's ^C, not a driver crash
    assert plain.signal is None and plain.returncode == 130


def test_the_ggml_vulkan_lines_of_two_versions():
    old = parse_device_line(
        "ggml_vulkan: 0 = Adreno (TM) 740 (Qualcomm Technologies Inc. Adreno Vulkan Driver) | uma: 1 | "
        "fp16: 1 | warp size: 64 | shared memory: 32768 | int dot: 0 | matrix cores: none"
    )
    assert (
        old["name"] == "Adreno (TM) 740"
        and old["driver"] == "Qualcomm Technologies Inc. Adreno Vulkan Driver"
    )
    assert (old["uma"], old["fp16"], old["warp_size"], old["matrix_cores"]) == (True, True, 64, "none")
    new = parse_device_line(
        "ggml_vulkan: 1 = llvmpipe (LLVM 22.1.8, 256 bits) (llvmpipe) | uma: 0 | fp16: 1 | bf16: 0 | "
        "fp4: 0 | warp size: 8 | shared memory: 32768 | int dot: 0 | matrix cores: KHR_coopmat"
    )
    assert (new["index"], new["name"], new["driver"], new["fp4"]) == (
        1,
        "llvmpipe (LLVM 22.1.8, 256 bits)",
        "llvmpipe",
        False,
    )
    assert parse_device_line("ggml_vulkan: Found 1 Vulkan devices:") is None
    picked = parse_facts([old["line"], new["line"]], index=1)
    assert picked["device"]["name"].startswith("llvmpipe")


def test_buffer_lines_sum_per_buffer_and_skip_the_destructor_summary():
    facts = parse_facts(
        [
            "llama_kv_cache:        CPU KV buffer size =     0.50 MiB",
            "llama_kv_cache:        CPU KV buffer size =     3.75 MiB",
            "~llama_context:    Vulkan0 compute buffer size is   0.0343 MiB, matches expectation",
            "sched_reserve: Vulkan_Host compute buffer size =     1.00 MiB",
        ]
    )
    assert facts["buffers"] == {"CPU KV": round(4.25 * (1 << 20)), "Vulkan_Host compute": 1 << 20}
