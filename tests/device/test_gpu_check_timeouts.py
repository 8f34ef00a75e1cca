"""A timeout is not a verdict (engine/checked_run.py, engine/gpu_check.py): a check still using CPU at its
deadline is `slow` (a driver compiling its pipelines), one using none is `hung`; either is run once more with
a longer deadline, is remembered with when it was made, and is checked again by the next check that may run
one (tune), while a crash stays remembered. Stand-in programs: tests/device/gpukit.py."""

from __future__ import annotations

import time

import pytest
from gpukit import calls, fake_tools

from edgepilot.device.gpu_llama import LlamaDevice
from edgepilot.engine import gpu_check
from edgepilot.engine.checked_run import deadline_from_env, needs_recheck, run_checked

DEVICE = LlamaDevice("Vulkan0", "Mali-G77 MC9", "vulkan", 7245 << 20, 5120 << 20)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path / "data"))


def tools(tmp_path, mode):
    server = fake_tools(tmp_path / "bin", mode)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    return server, model


def test_a_check_still_busy_at_its_deadline_is_slow_not_hung_and_is_tried_once_more(tmp_path):
    server, model = tools(tmp_path, "spin")
    heard: list[str] = []
    start = time.monotonic()
    got = gpu_check.check(server, DEVICE, 1.0, model, progress=heard.append)
    assert time.monotonic() - start < 15
    assert (got.ok, got.outcome, got.attempts) == (None, "slow", 2), got.detail
    assert calls(tmp_path / "bin") == 2
    assert "slow start, not a verdict" in got.detail and "probe --check-gpu" in got.detail
    assert got.cpu_seconds and got.cpu_seconds > 1.0
    assert any("still busy" in h and "trying once more, up to 3 s" in h for h in heard), heard
    remembered = gpu_check.cached_check(server, DEVICE)
    assert remembered.outcome == "slow" and remembered.checked_at


def test_a_remembered_timeout_is_checked_again_a_remembered_crash_is_not(tmp_path):
    server, model = tools(tmp_path, "spin")
    gpu_check.check(server, DEVICE, 0.6, model)
    assert calls(tmp_path / "bin") == 2
    shown = gpu_check.check(server, DEVICE, 0.6, model, recheck_timeouts=False)  # probe without --check-gpu
    assert shown.cached and shown.outcome == "slow" and calls(tmp_path / "bin") == 2
    fake_tools(tmp_path / "bin", "segv")  # the driver now fails for real (same program, same version)
    again = gpu_check.check(server, DEVICE, 0.6, model)  # tune: a timeout is checked again
    assert (again.cached, again.outcome) == (False, "crashed") and calls(tmp_path / "bin") == 3
    kept = gpu_check.check(server, DEVICE, 0.6, model)
    assert (kept.cached, kept.outcome) == (True, "crashed") and calls(tmp_path / "bin") == 3
    fresh = gpu_check.check(server, DEVICE, 0.6, model, fresh=True)  # probe --check-gpu
    assert not fresh.cached and calls(tmp_path / "bin") == 4


def test_a_slow_start_that_ends_in_the_longer_try_is_ok(tmp_path, monkeypatch):
    monkeypatch.setenv("SPIN_S", "2")
    server, model = tools(tmp_path, "slow-ok")
    got = gpu_check.check(server, DEVICE, 1.0, model)
    assert (got.ok, got.outcome, got.attempts) == (True, "ok", 2), got.detail
    assert "was still busy at its 1 s deadline" in got.detail
    assert got.facts["buffers"] == {"Vulkan0 model": round(3.81 * (1 << 20))}
    assert gpu_check.check(server, DEVICE, 1.0, model).cached is True and calls(tmp_path / "bin") == 2


def test_a_hang_is_tried_once_more_and_given_up_once_it_stays_idle(tmp_path):
    server, model = tools(tmp_path, "hang")
    start = time.monotonic()
    got = gpu_check.check(server, DEVICE, 1.0, model)
    took = time.monotonic() - start
    assert (got.ok, got.outcome, got.attempts) == (False, "hung", 2)
    assert calls(tmp_path / "bin") == 2
    assert took < 1.0 + 3.0, "the second try waited out its whole deadline though the child did nothing"
    assert "no progress (no CPU used)" in got.detail and "used no CPU for 1 s" in got.detail
    assert needs_recheck(got.outcome) and not needs_recheck("crashed")


def test_the_deadline_comes_from_the_environment(tmp_path, monkeypatch):
    server, model = tools(tmp_path, "spin")
    monkeypatch.setenv(gpu_check.DEADLINE_ENV, "0.5")
    start = time.monotonic()
    got = gpu_check.check(server, DEVICE, model=model)
    assert got.outcome == "slow" and time.monotonic() - start < 10
    for bad in ("nan", "-1", "inf", "0", "x"):
        monkeypatch.setenv(gpu_check.DEADLINE_ENV, bad)
        assert deadline_from_env(gpu_check.DEADLINE_ENV, 60.0) == 60.0


def test_run_checked_tells_a_slow_start_from_a_hang_for_any_program():
    busy = run_checked(["python3", "-c", "while True: pass"], 0.6)
    assert (busy.outcome, busy.retried) == ("slow", True) and busy.result.busy
    idle = run_checked(["sleep", "30"], 0.6)
    assert (idle.outcome, idle.retried) == ("hung", True) and idle.result.busy is False
    quick = run_checked(["sh", "-c", "exit 0"], 5.0)
    assert (quick.outcome, quick.retried) == ("ok", False)
