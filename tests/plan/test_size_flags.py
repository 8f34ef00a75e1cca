"""Every size flag goes through one bounded parser (edgepilot.sizes) with the flag's own bounds (issue 25):
1e400, 0.1, 0.5B, 1e-30GiB and "1 2 3" are one stderr line and exit 2 in each command, never a traceback, a
zero budget or 123 bytes. Each case runs the real `edgepilot` in a child with a timeout (serve must not
start).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from edgepilot.cli.flags import MIN_BUDGET, size_or_none
from edgepilot.errors import UserError

TIMEOUT = 60  # a child imports click and rich; a server that started anyway is what this guards against
HOSTILE = ["1e400", "0.1", "0.5B", "1e-30GiB", "1 2 3", "1000", "-1GiB", "nan", "inf", "9" * 5000]


def edgepilot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edgepilot", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def assert_one_line(out: subprocess.CompletedProcess[str], flag: str) -> None:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr[-2000:]
    assert lines[0].startswith("edgepilot: error:") and flag in lines[0], lines


@pytest.mark.parametrize("value", HOSTILE)
def test_a_budget_is_at_least_1_mib_and_at_most_1_pib(value):
    with pytest.raises(UserError, match="--budget"):
        size_or_none(value)


def test_a_budget_of_1_mib_and_more_is_read():
    assert size_or_none("1MiB") == MIN_BUDGET
    assert size_or_none("2 GiB") == 2 << 30
    assert size_or_none(None) is None


@pytest.mark.parametrize(
    "command",
    [
        ["fit", "{model}", "--budget"],
        ["run", "{model}", "-p", "hi", "-n", "1", "--budget"],
        ["serve", "{model}", "--port", "0", "--budget"],
        ["chat", "{model}", "--budget"],
        ["serve", "{model}", "--port", "0", "--min-available"],
        ["serve", "{model}", "--port", "0", "--max-body"],
        ["doctor", "--memory-limit", "{value}", "--", "true"],
    ],
    ids=lambda c: " ".join(c[:1] + [c[-1] if c[-1].startswith("--") else c[1]]),
)
@pytest.mark.parametrize("value", ["1e400", "0.5B", "1 2 3"])
def test_every_size_flag_refuses_in_one_line(command, value, smollm_path):
    args = [a.format(model=smollm_path, value=value) for a in command]
    if "{value}" not in command:
        args.append(value)
    flag = next(a for a in command if a.startswith("--") and a != "--port")
    assert_one_line(edgepilot(*args), flag)


def test_max_body_has_its_own_bounds(smollm_path):
    for value, word in (("512", "at least 1 KiB"), ("2GiB", "at most 1 GiB")):
        out = edgepilot("serve", str(smollm_path), "--port", "0", "--max-body", value)
        assert_one_line(out, "--max-body")
        assert word in out.stderr


def test_a_budget_of_one_kib_is_refused_not_planned(smollm_path):
    out = edgepilot("fit", str(smollm_path), "--budget", "1KiB")
    assert_one_line(out, "--budget")
    assert "at least 1 MiB" in out.stderr
