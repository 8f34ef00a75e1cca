"""The context a memory kill took away comes back: the planner decides how far under the budget now, and a
quiet, shrunk worker is restarted with it (a planned restart, not a death)."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest
from servekit import write_device

from edgepilot.plan.requested import RequestedSettings
from edgepilot.serve import watchdog as wd
from edgepilot.serve.context_policy import GrowthPolicy, after_memory_returns, grow_ctx
from edgepilot.serve.planning import after_memory_kill
from edgepilot.serve.state import READY, Pressure, ServerState
from edgepilot.tuned.decide import decide

MiB = 1 << 20


def test_grow_ctx_goes_toward_the_planned_context_only():
    assert grow_ctx(512, 4096, 8192) == 4096  # never past what was planned
    assert grow_ctx(512, 4096, 2048) == 2048  # as far as the planner fits
    assert grow_ctx(512, 4096, 300) == 512  # never smaller than now
    assert grow_ctx(512, 4096, 0) == 512


def test_each_memory_death_makes_the_wait_longer():
    policy = GrowthPolicy(planned_ctx=4096, grow_after=300)
    policy.memory_death()
    policy.memory_death()
    assert policy.grow_after == 1200
    for _ in range(10):
        policy.memory_death()
    assert policy.grow_after == 3600
    assert policy.quiet(uptime=4000, busy=False, gated=False)
    assert not policy.quiet(uptime=4000, busy=True, gated=False)
    assert not policy.quiet(uptime=4000, busy=False, gated=True)
    assert not policy.quiet(uptime=100, busy=False, gated=False)


def _settings(model: Path, root: Path, n_ctx: int):
    return decide(model, RequestedSettings(n_ctx=n_ctx), root=root).settings


def test_the_budget_now_decides_how_far_it_grows(smollm_path, tmp_path):
    roomy, tight = tmp_path / "roomy", tmp_path / "tight"
    write_device(roomy, available_mib=3000)
    write_device(tight, available_mib=40)
    shrunk = _settings(smollm_path, roomy, 512)
    grown = after_memory_returns(smollm_path, shrunk, 2048, roomy)
    assert grown is not None
    settings, why = grown
    assert settings.n_ctx == 2048 and "512 -> 2048" in why and "memory is back" in why
    assert settings.n_threads == shrunk.n_threads and settings.n_ubatch == shrunk.n_ubatch  # only the context
    assert after_memory_returns(smollm_path, shrunk, 2048, tight) is None  # memory is not back
    assert after_memory_returns(smollm_path, settings, 2048, roomy) is None  # nothing to grow


def test_after_a_memory_kill_the_short_lane_is_counted_in_the_smaller_context(smollm_path, tmp_path):
    write_device(tmp_path, available_mib=3000)
    current = _settings(smollm_path, tmp_path, 4096)
    peak = 285 * MiB  # the worker's peak when it was killed: the memory that was really there
    alone, _ = after_memory_kill(smollm_path, current, peak, tmp_path)
    laned, why = after_memory_kill(smollm_path, current, peak, tmp_path, short_ctx=1024)
    assert laned.n_ctx < alone.n_ctx < current.n_ctx, (laned.n_ctx, alone.n_ctx)
    assert "the worker's peak when it was killed" in why


@pytest.fixture
def short_socket_dir():
    d = Path(tempfile.mkdtemp(prefix="ep-grow-"))  # AF_UNIX paths are limited to ~108 bytes
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_a_quiet_shrunk_worker_is_restarted_with_the_planned_context(
    smollm_path, tmp_path, short_socket_dir, monkeypatch
):
    monkeypatch.setattr(wd, "GROW_CHECK_SECONDS", 0.5)
    device = tmp_path / "device"
    write_device(device, available_mib=3000)
    shrunk = _settings(smollm_path, device, 512)  # as after a memory kill of a worker planned at 1024
    state = ServerState(smollm_path.name, 5)
    state.pressure = Pressure(available_bytes=3000 * MiB, total_bytes=4000 * MiB, psi_some_avg10=0.0)
    logs: list[str] = []
    launch = wd.Launch(smollm_path, smollm_path.name, str(short_socket_dir / "w.sock"), 16)
    dog = wd.Watchdog(
        launch,
        shrunk,
        state,
        logs.append,
        lambda _info: None,
        logs.append,
        root=device,
        growth=GrowthPolicy(planned_ctx=1024, grow_after=2.0),
    )
    seen: list[tuple[int, int, str]] = []
    dog.start()
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            w = state.worker
            if w is not None and (not seen or seen[-1][0] != w.pid or seen[-1][2] != state.phase):
                seen.append((w.pid, w.n_ctx, state.phase))
            if w is not None and w.n_ctx == 1024 and state.phase == READY:
                break
            time.sleep(0.1)
    finally:
        dog.shutdown()
    assert state.failure is None, logs
    ready = [(pid, n_ctx) for pid, n_ctx, phase in seen if phase == READY]
    assert ready[0][1] == 512 and ready[-1][1] == 1024, (seen, logs)
    assert ready[0][0] != ready[-1][0]  # a new worker
    assert state.deaths == []  # a planned restart, not a death
    assert state.restarts == 1
    assert any("512 -> 1024" in m and "memory is back" in m for m in logs), logs
