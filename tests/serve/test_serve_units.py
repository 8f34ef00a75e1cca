"""The pieces of `edgepilot serve` that need no model: stop strings, address and key checks, the memory
gate, context shrinking, the wake lock, and a worker that cannot start."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from edgepilot.engine.stops import StopMatcher
from edgepilot.errors import UserError
from edgepilot.plan.settings import EngineSettings
from edgepilot.serve.config import (
    KEY_ENV,
    ServeConfig,
    check_bind,
    default_min_available,
    is_loopback,
    read_api_key,
)
from edgepilot.serve.front import Front
from edgepilot.serve.incoming import loopback_host_header
from edgepilot.serve.planning import MIN_CTX, after_memory_kill, shrink_ctx
from edgepilot.serve.pressure import gate
from edgepilot.serve.state import FAILED, Pressure, ServerState
from edgepilot.serve.wakelock import WakeLock
from edgepilot.serve.watchdog import Launch, Watchdog

MIB = 1 << 20


def _feed(stops: list[str], pieces: list[str]) -> tuple[str, bool]:
    m = StopMatcher(stops)
    out, hit = [], False
    for p in pieces:
        text, hit = m.feed(p)
        out.append(text)
        if hit:
            break
    if not hit:
        out.append(m.flush())
    return "".join(out), hit


@pytest.mark.parametrize(
    ("stops", "pieces", "text", "hit"),
    [
        ([], ["a", "b"], "ab", False),
        (["\n\n"], ["Hello\n", "\nWorld"], "Hello", True),
        (["END"], ["the E", "N", "D of it"], "the ", True),
        (["END"], ["the E", "N", "d"], "the ENd", False),  # held back, then released
        (["x", "yz"], ["ay", "z"], "a", True),
        (["stop"], ["st"], "st", False),  # generation ended while held: flushed
    ],
)
def test_stop_strings(stops, pieces, text, hit):
    assert _feed(stops, pieces) == (text, hit)


def test_stop_matcher_never_sends_part_of_a_stop():
    m = StopMatcher(["</s>"])
    sent = [m.feed(c)[0] for c in "ab</"]
    assert "".join(sent) == "ab"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"])
def test_loopback_hosts(host):
    assert is_loopback(host)
    check_bind(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "10.0.0.2"])
def test_public_hosts_need_a_key(host):
    assert not is_loopback(host)
    with pytest.raises(UserError, match="without an API key"):
        check_bind(host, None)
    check_bind(host, "a-key")


def test_config_validation():
    with pytest.raises(UserError, match="--max-queue"):
        ServeConfig(max_queue=-1).validate()
    with pytest.raises(UserError, match="--max-tokens"):
        ServeConfig(max_tokens=0).validate()
    assert "secret-value" not in repr(ServeConfig(api_key="secret-value"))


def test_api_key_sources(tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    assert read_api_key(None, None) is None
    assert read_api_key(" k1 ", None) == "k1"
    f = tmp_path / "key"
    f.write_text("from-file\n")
    assert read_api_key(None, str(f)) == "from-file"
    monkeypatch.setenv(KEY_ENV, "from-env")
    assert read_api_key(None, None) == "from-env"
    with pytest.raises(UserError, match="one word"):
        read_api_key("two words", None)
    with pytest.raises(UserError, match="directory"):
        read_api_key(None, str(tmp_path))


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("127.0.0.1:8080", True),
        ("localhost", True),
        ("localhost:80", True),
        ("[::1]:8080", True),
        ("127.0.0.1", True),
        ("evil.example", False),
        ("127.0.0.1.nip.io:8080", False),
        ("192.168.1.4:8080", False),
    ],
)
def test_host_header_check(value, ok):
    assert loopback_host_header(value, "127.0.0.1") is ok


def test_host_header_is_checked_on_loopback_only():
    assert Front(ServeConfig(), ServerState("m", 5), "/x", print).check_host
    assert not Front(ServeConfig(host="0.0.0.0", api_key="k"), ServerState("m", 5), "/x", print).check_host


def test_constant_time_key_check():
    front = Front(ServeConfig(api_key="right-key"), ServerState("m", 5), "/nonexistent", print)
    assert front.authorized({b"authorization": b"Bearer right-key"})
    assert front.authorized({b"authorization": b"bearer right-key"})
    assert not front.authorized({b"authorization": b"Bearer right-kez"})
    assert not front.authorized({b"authorization": b"Bearer right-key-longer"})
    assert not front.authorized({b"authorization": b"Basic right-key"})
    assert not front.authorized({})


def test_memory_gate_with_hysteresis():
    limit, floor = 10.0, 200 * MIB
    calm = Pressure(available_bytes=1000 * MIB, psi_some_avg10=1.0)
    assert gate(calm, limit, floor, False) == (False, None)
    closed, why = gate(Pressure(available_bytes=1000 * MIB, psi_some_avg10=12.0), limit, floor, False)
    assert closed and "PSI" in why
    closed, why = gate(Pressure(available_bytes=150 * MIB, psi_some_avg10=0.0), limit, floor, False)
    assert closed and "150 MiB available" in why
    # easing but not eased: stays closed until clearly below the limits
    assert gate(Pressure(available_bytes=1000 * MIB, psi_some_avg10=8.0), limit, floor, True)[0]
    assert gate(Pressure(available_bytes=220 * MIB, psi_some_avg10=0.0), limit, floor, True)[0]
    assert not gate(Pressure(available_bytes=1000 * MIB, psi_some_avg10=5.0), limit, floor, True)[0]
    assert gate(Pressure(), limit, floor, False) == (False, None)  # nothing readable: stay open


def test_default_memory_floor():
    assert default_min_available(None) == 128 * MIB
    assert default_min_available(2 << 30) == 128 * MIB
    assert default_min_available(8 << 30) == int(8 * 1024 * MIB * 0.05)
    assert default_min_available(64 << 30) == 512 * MIB


@pytest.mark.parametrize(
    ("current", "planner", "expected"),
    [(1024, 0, 768), (4096, 1024, 1024), (4096, 8192, 3072), (512, 0, MIN_CTX), (256, 0, 256)],
)
def test_context_shrinks_after_a_memory_kill(current, planner, expected):
    assert shrink_ctx(current, planner) == expected


def test_after_memory_kill_plans_under_the_measured_peak(smollm_path):
    current = EngineSettings(n_ctx=4096, n_threads=2)
    smaller, why = after_memory_kill(smollm_path, current, peak_rss=260 * MIB)
    assert smaller.n_ctx < 4096 and smaller.n_threads == 2
    assert "4096 ->" in why and "peak" in why


def test_wake_lock_only_where_the_commands_exist(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    lock = WakeLock()
    assert lock.acquire() is False
    lock.release()
    log = tmp_path / "log"
    for name in ("termux-wake-lock", "termux-wake-unlock"):
        tool = tmp_path / name
        tool.write_text(f'#!/bin/sh\necho {name} >> "{log}"\n')
        tool.chmod(0o755)
    assert lock.acquire() is True
    lock.release()
    lock.release()  # once only
    assert log.read_text().split() == ["termux-wake-lock", "termux-wake-unlock"]


def test_a_worker_that_cannot_start_is_not_restarted_in_a_loop(smollm_path, tmp_path):
    fake = tmp_path / "python"
    fake.write_text(
        "#!/bin/sh\n"
        "echo \"llama_model_load: error loading model: tensor 'blk.0.ffn' data is not within the file "
        'bounds, model is corrupted or incomplete" >&2\n'
        "exit 2\n"
    )
    fake.chmod(0o755)
    state = ServerState("m", 5)
    failures: list[str] = []
    done = threading.Event()

    def failed(message: str) -> None:
        failures.append(message)
        done.set()

    launch = Launch(Path(smollm_path), "m", str(tmp_path / "w.sock"), 16, python=str(fake))
    dog = Watchdog(
        launch, EngineSettings(n_ctx=512, n_threads=1), state, lambda _m: None, lambda _i: None, failed
    )
    dog.start()
    assert done.wait(60)
    dog.join(10)
    assert not dog.is_alive()
    assert state.phase == FAILED and state.restarts == 0
    assert len(state.deaths) == 1 and state.deaths[0].action == "not restarted"
    assert state.deaths[0].cause == "model-corrupt"
    assert "could not start" in failures[0] and "fix:" in failures[0]
