"""vulkaninfo's `deviceName = ...` line in a log the doctor reads: a long run of spaces in it used to cost
time quadratic in its length (`(.+?)\\s*$`: 100 KB took minutes); the name is still read as it was."""

from __future__ import annotations

import signal

import pytest

from edgepilot.doctor.vulkan_log import read_vulkan

API = "    apiVersion         = 1.1.177"


@pytest.fixture(autouse=True)
def bounded():
    def too_slow(*_args):
        raise AssertionError("the deviceName line took more than 10 s")

    old = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(10)  # generous: linear is milliseconds, the old pattern minutes
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize(
    "line",
    [
        "deviceName = x" + " " * 100_000 + "y",
        "    deviceName         =" + " " * 100_000,
        "deviceName = Mali" + " " * 100_000,
    ],
    ids=["inner", "only-spaces", "trailing"],
)
def test_a_100_kb_run_of_spaces_is_read_fast(line):
    log = read_vulkan([API, line])
    name = log.api[0].name
    assert name == name.strip()
    assert name in ("", "Mali") or (name.startswith("x") and name.endswith("y"))


def test_the_name_is_read_as_before():
    log = read_vulkan([API, "    deviceName         = Mali-G52 MC2  "])
    assert log.api[0].name == "Mali-G52 MC2"
