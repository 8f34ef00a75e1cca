"""The GPU lane's real crash logs (tests/logs/vulkan-*.txt, made by tests/gpu's lying layer) through the real
`edgepilot doctor` command: the cause, its evidence and a fix to paste, at 50 columns too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from doctorkit import LOGS


@pytest.fixture(scope="module")
def mali_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A device tree whose vulkaninfo is the one the lying layer showed: Mali-G77 MC9, apiVersion 1.1.177."""
    root = tmp_path_factory.mktemp("mali")
    (root / "commands").mkdir()
    text = (LOGS / "vulkan-bda-vulkaninfo.txt").read_text()
    (root / "commands" / "vulkaninfo-summary.txt").write_text(text)
    return root


@pytest.fixture(scope="module")
def bare_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bare")  # a device nothing is known about


def doctor(*args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    argv = [sys.executable, "-m", "edgepilot", "doctor", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


def causes(log: str, code: int, root: Path) -> list[dict]:
    done = doctor("--log", str(LOGS / log), "--exit-code", str(code), "--root", str(root), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["causes"]


def test_bda_crash_on_the_old_mali_names_the_null_function_first(mali_root: Path) -> None:
    found = causes("vulkan-bda-null-sigsegv.txt", 139, mali_root)
    ids = [c["id"] for c in found]
    assert ids[:3] == ["vulkan-null-function", "vulkan-api-too-old", "vulkan-driver-crash"]
    null = found[0]
    assert "exit status 139 = killed by SIGSEGV (11)" in null["evidence"]
    assert any("apiVersion 1.1.177" in e for e in null["evidence"])
    assert any(
        e.startswith("ggml_vulkan: 0 = Mali-G77 MC9 (Mali-G77 r32p1) | uma: 1") for e in null["evidence"]
    )
    assert "`-dev none -ngl 0`" in null["fix"] and "vkGetBufferDeviceAddress" in null["fix"]
    crash = found[2]
    assert any(e.startswith("last line: create_tensor:") for e in crash["evidence"])


def test_bda_crash_without_the_device_is_a_driver_crash(bare_root: Path) -> None:
    """The log alone shows a Vulkan device and SIGSEGV, not its apiVersion: no guess about why."""
    found = causes("vulkan-bda-null-sigsegv.txt", 139, bare_root)
    assert found[0]["id"] == "vulkan-driver-crash"
    assert {"vulkan-null-function", "vulkan-api-too-old"}.isdisjoint(c["id"] for c in found)


def test_the_kernel_line_of_a_null_call_is_evidence(mali_root: Path) -> None:
    found = causes("vulkan-bda-null-dmesg.txt", 139, mali_root)
    assert found[0]["id"] == "vulkan-null-function"
    assert any("segfault at 0 ip 0000000000000000" in e for e in found[0]["evidence"])


def test_a_crash_that_printed_almost_nothing_needs_the_device(mali_root: Path, bare_root: Path) -> None:
    """llama-completion's asynchronous log loses the Vulkan lines at the crash: 5 lines and exit 139."""
    assert causes("vulkan-bda-completion-sigsegv.txt", 139, bare_root)[0]["id"] == "unknown"
    on_mali = causes("vulkan-bda-completion-sigsegv.txt", 139, mali_root)
    assert on_mali[0]["id"] == "vulkan-null-function"
    crash = next(c for c in on_mali if c["id"] == "vulkan-driver-crash")
    assert any("Mali-G77 MC9, Vulkan 1.1.177" in e for e in crash["evidence"])


def test_a_crash_while_loading_backends_says_keep_the_driver_out(mali_root: Path) -> None:
    """Mode enumerate: `-dev none` did not help, the driver died as libggml-vulkan.so was loaded."""
    found = causes("vulkan-enumerate-sigsegv.txt", 139, mali_root)
    assert found[0]["id"] == "vulkan-driver-crash"
    assert "VK_LOADER_DRIVERS_DISABLE='*'" in found[0]["fix"]
    assert "last line: 0.00.009.594 I llama_completion: llama backend init" in found[0]["evidence"]
    assert "vulkan-null-function" not in [c["id"] for c in found]


def test_create_device_crash(bare_root: Path) -> None:
    found = causes("vulkan-create-device-sigsegv.txt", 139, bare_root)
    assert found[0]["id"] == "vulkan-driver-crash"
    assert found[0]["evidence"][0] == "exit status 139 = killed by SIGSEGV (11)"
    assert any("load_tensors: loading model tensors" in e for e in found[0]["evidence"])


def test_an_offloaded_run_killed_for_memory_lists_its_gpu_buffers(bare_root: Path) -> None:
    found = causes("vulkan-offload-oom-killed.txt", 137, bare_root)
    top = found[0]
    assert top["id"] == "killed-by-system"
    assert "on Vulkan0: model 92 MiB, KV 6 MiB, compute 50 MiB" in top["evidence"]
    assert any("self 148 MiB = model 92 + context 5 + compute 50" in e for e in top["evidence"])
    assert "`-ngl 15` of 31" in top["fix"] and "`-dev none -ngl 0`" in top["fix"]


def test_a_bench_with_cpu_and_gpu_rows_says_the_gpu_is_slower(bare_root: Path) -> None:
    found = causes("vulkan-bench-gpu-slower.txt", 0, bare_root)
    top = found[0]
    assert top["id"] == "gpu-slower-than-cpu"
    assert "prompt (pp32): CPU 138.0 t/s, Vulkan0 3.2 t/s" in top["evidence"]
    assert "generation (tg8): CPU 25.2 t/s, Vulkan0 2.8 t/s" in top["evidence"]
    assert "`-dev none`" in top["fix"]


def test_a_successful_offload_is_no_crash(bare_root: Path) -> None:
    ids = [c["id"] for c in causes("vulkan-lavapipe-offload-ok.txt", 0, bare_root)]
    assert not {"vulkan-driver-crash", "gpu-slower-than-cpu", "killed-by-system"} & set(ids)


def test_reads_well_at_50_columns(mali_root: Path) -> None:
    log = str(LOGS / "vulkan-bda-null-sigsegv.txt")
    done = doctor("--log", log, "--exit-code", "139", "--root", str(mali_root), columns=50)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("1. vulkan-null-function")
    assert all(len(ln) <= 50 or len(ln.split()) == 1 for ln in lines)  # but a word wider than the screen
    assert "`-dev none -ngl 0`" in done.stdout


def test_a_missing_log_is_one_line_and_status_2(tmp_path: Path) -> None:
    done = doctor("--log", str(tmp_path / "vulkan-crash.txt"), "--exit-code", "139")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_exit_status_can_be_given_as_the_signal(mali_root: Path) -> None:
    log = str(LOGS / "vulkan-bda-null-sigsegv.txt")
    by_name = doctor("--log", log, "--exit-code", "SIGSEGV", "--root", str(mali_root), "--json")
    by_number = doctor("--log", log, "--exit-code", "139", "--root", str(mali_root), "--json")
    assert by_name.returncode == by_number.returncode == 0, by_name.stderr
    assert json.loads(by_name.stdout)["causes"] == json.loads(by_number.stdout)["causes"]
    bad = doctor("--log", log, "--exit-code", "SIGNOPE")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "SIGKILL" in bad.stderr, bad.stderr
