"""Nothing matches: `unknown`, with what was checked. No input, however odd, raises."""

from __future__ import annotations

import random

import pytest
from doctorkit import DEVICES, diagnose_log

from edgepilot.doctor.diagnose import diagnose
from edgepilot.doctor.evidence import read_log


def test_a_clean_log_is_unknown_and_lists_what_was_checked():
    d = diagnose_log("unknown-vulkan-ok-granite.txt")
    assert [c.id for c in d.causes] == ["unknown"]
    checked = d.causes[0].evidence
    assert any(c.startswith("log: ") for c in checked)
    assert "exit status: unknown" in checked
    assert any(c.startswith("device: not probed: a saved log may come from another device") for c in checked)
    assert any(c.startswith("rules: killed-by-system") and "framework-needs-x86" in c for c in checked)


@pytest.mark.parametrize(
    "lines",
    [
        None,
        [],
        [""],
        ["\x00\x01\x02\xff garbage \ufffd"],
        ["x" * 200_000],
        ["| threads | test | t/s |", "| x | y |", "| 4 | pp | nan ± 1 |", "| four | tg | 1.0 |"],
        ["n_ctx = 99999999999999999999", "failed to allocate buffer of size 18446744073709549568"],
        ["llama_kv_cache: size = 0.00 MiB (     0 cells,  0 layers,  1/1 seqs)", "n_threads = 0 / 0"],
        ["-m", "-c", "--ctx-size", "built with for"],
    ],
)
def test_odd_input_never_raises(lines):
    d = diagnose(lines, root=None)
    assert d.causes and d.causes[0].id
    assert all(c.fix for c in d.causes)


def test_random_bytes_never_raise(tmp_path):
    rng = random.Random(7)
    junk = tmp_path / "junk.log"
    junk.write_bytes(bytes(rng.randrange(256) for _ in range(100_000)))
    d = diagnose(read_log(junk), exit_code=3, root=None)
    assert d.causes[0].id == "unknown"
    assert "exit status 3" in d.causes[0].evidence


@pytest.mark.parametrize("code", [0, 1, 2, 127, 139, 255, -11, 400])
def test_any_exit_code_is_accepted(code):
    d = diagnose(["something failed"], exit_code=code, root=None)
    assert d.causes


def test_a_device_alone_gives_unknown_first_and_device_facts_after():
    # No log, no exit status: the Exynos 990's Mali-G77 (Vulkan 1.1) is a fact worth a line, not a diagnosis.
    d = diagnose(None, root=DEVICES / "exynos990-galaxy-s20")
    assert d.causes[0].id == "unknown"
    assert "vulkan-null-function" in [c.id for c in d.causes[1:]]
