"""A worker killed mid-reply comes back: clients see an error or 503 + Retry-After, then answers; the
doctor's diagnosis is recorded. The context shrinks only for a kill with memory evidence (here: the watched
device's memory pressure) and grows back once memory returns. Also: Termux's wake lock, stop."""

from __future__ import annotations

import json
import os
import signal
import time

import openai
import pytest
from servekit import Served, start_server, write_device

MEMORY_CAUSES = ("killed-by-system", "out-of-memory-alloc", "context-too-large")

FAKE_TOOL = """#!/bin/sh
echo "$(basename "$0")" >> "{log}"
"""


@pytest.fixture(scope="module")
def restartable(smollm_path, tmp_path_factory) -> Served:
    tmp = tmp_path_factory.mktemp("serve-restart")
    bin_dir, sock_tmp = tmp / "bin", tmp / "tmpdir"
    bin_dir.mkdir()
    sock_tmp.mkdir()
    for name in ("termux-wake-lock", "termux-wake-unlock"):
        tool = bin_dir / name
        tool.write_text(FAKE_TOOL.format(log=tmp / "wake.log"))
        tool.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "TMPDIR": str(sock_tmp)}
    write_device(tmp / "device")
    args = ["--ctx", "1024", "--max-tokens", "400", "--watch-root", str(tmp / "device")]
    server = start_server(smollm_path, *args, tmp=tmp, env=env)
    server.tmp = tmp  # type: ignore[attr-defined]
    yield server
    server.stop(signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_wake_lock_taken_on_start(restartable):
    assert restartable.info["wake_lock"] is True
    assert (restartable.tmp / "wake.log").read_text().split() == ["termux-wake-lock"]


def test_killed_worker_comes_back_and_answers(restartable):
    client = restartable.client(timeout=60)
    old = restartable.status()["worker"]
    stream = client.chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": "Tell me a very long story about a lighthouse."}],
        max_tokens=400,
        temperature=0.8,
        stream=True,
    )
    got, ended = [], None
    t0 = time.monotonic()
    try:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                got.append(chunk.choices[0].delta.content)
                if len(got) == 3:
                    os.kill(old["pid"], signal.SIGKILL)  # mid-reply
        ended = "complete"
    except openai.APIError as exc:  # the front's error event: the reply was cut, and the client is told
        ended = f"error: {exc}"
    assert time.monotonic() - t0 < 60
    assert len(got) >= 3
    assert ended.startswith("error") and "restarting" in ended, ended

    seen = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            r = client.chat.completions.create(
                model="any", messages=[{"role": "user", "content": "Hi"}], max_tokens=8
            )
            seen.append(200)
            break
        except openai.APIStatusError as exc:
            assert exc.status_code == 503, exc
            assert int(exc.response.headers["retry-after"]) >= 1
            seen.append(503)
            time.sleep(0.3)
    assert seen[-1] == 200, seen
    assert r.choices[0].message.content is not None

    status = restartable.status()
    assert status["phase"] == "ready" and status["restarts"] == 1
    death = status["deaths"][-1]
    assert death["pid"] == old["pid"] and death["signal_name"] == "SIGKILL" and death["exit_code"] == 137
    # 3000 MiB available and no pressure on the watched device: a SIGKILL from outside, not for memory
    assert death["cause"] == "unknown" and "SIGKILL from outside" in death["title"], death
    assert any("far below" in e for e in death["evidence"]), death["evidence"]
    assert death["peak_rss_bytes"] > 50 << 20
    assert status["worker"]["pid"] != old["pid"] and not _alive(old["pid"])
    assert status["worker"]["n_ctx"] == 1024  # not a memory kill: the same context
    assert "->" not in death["action"]
    assert "SIGKILL) after" in restartable.stderr() and "unknown" in restartable.stderr()


def _wait_for(check, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_kill_under_memory_pressure_shrinks_the_context(restartable):
    device = restartable.tmp / "device"
    before = restartable.status()
    assert before["worker"]["n_ctx"] == 1024
    write_device(device, psi=40.0)  # the system is reclaiming hard, as before an lmkd kill
    try:
        _wait_for(lambda: restartable.status()["pressure"]["psi_some_avg10"] == 40.0, "the memory watch")
        os.kill(before["worker"]["pid"], signal.SIGKILL)
        after = restartable.ready_again(before["worker"]["pid"])
    finally:
        write_device(device)  # memory is back
    death = after["deaths"][-1]
    assert death["cause"] == "killed-by-system", death
    assert death["seen"] == "the worker was killed (SIGKILL: killed-by-system)", death
    assert any("PSI" in e for e in death["evidence"]), death["evidence"]
    assert after["worker"]["n_ctx"] < 1024  # a memory kill: restarted with a smaller context
    assert "1024 ->" in death["action"]


def test_a_crash_after_memory_returns_grows_the_context_back(restartable):
    before = restartable.status()
    assert before["worker"]["n_ctx"] < 1024  # shrunk by the memory kill above
    _wait_for(lambda: not restartable.status()["pressure"]["gated"], "the memory gate to open")
    os.kill(before["worker"]["pid"], signal.SIGSEGV)
    after = restartable.ready_again(before["worker"]["pid"])
    death = after["deaths"][-1]
    assert death["signal_name"] == "SIGSEGV"
    assert death["cause"] not in MEMORY_CAUSES
    assert after["worker"]["n_ctx"] == 1024  # back to the planned context: the budget fits it again
    assert f"{before['worker']['n_ctx']} -> 1024" in death["action"] and "memory is back" in death["action"]
    assert after["restarts"] == before["restarts"] + 1
    reply = restartable.client().completions.create(model="any", prompt="Hi", max_tokens=2)
    assert reply.usage.completion_tokens >= 1


def test_a_crash_restarts_with_the_same_context(restartable):
    before = restartable.status()
    os.kill(before["worker"]["pid"], signal.SIGSEGV)
    after = restartable.ready_again(before["worker"]["pid"])
    death = after["deaths"][-1]
    assert death["signal_name"] == "SIGSEGV"
    assert death["cause"] not in MEMORY_CAUSES
    assert after["worker"]["n_ctx"] == before["worker"]["n_ctx"] == 1024  # same settings: nothing to regrow
    assert after["restarts"] == before["restarts"] + 1


def test_the_503_names_what_the_watchdog_saw(restartable):
    """Not "restarting after unknown": the signal (and the doctor's cause, when it found one)."""
    before = restartable.status()
    headers = {**restartable.auth(), "Content-Type": "application/json"}
    hi = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    os.kill(before["worker"]["pid"], signal.SIGKILL)
    messages = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any("after the worker" in m for m in messages):
        code, _, raw = restartable.request("POST", "/v1/chat/completions", hi, headers, timeout=60)
        if code == 503:
            messages.append(json.loads(raw)["error"]["message"])
        time.sleep(0.05)
    assert "the model server is restarting after the worker was killed (SIGKILL)" in messages, messages
    assert not any("after unknown" in m for m in messages), messages
    death = restartable.ready_again(before["worker"]["pid"])["deaths"][-1]
    assert death["seen"] == "the worker was killed (SIGKILL)", death


def test_stop_releases_everything(restartable):
    worker = restartable.status()["worker"]["pid"]
    assert restartable.stop(signal.SIGTERM) == 0
    assert not _alive(worker)
    assert (restartable.tmp / "wake.log").read_text().split() == ["termux-wake-lock", "termux-wake-unlock"]
    assert list((restartable.tmp / "tmpdir").iterdir()) == []  # the private socket directory is gone
    assert "stopped after" in restartable.stderr()
