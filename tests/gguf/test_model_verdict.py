"""One verdict for every tool: damaged copies of the real SmolLM2 file are refused by `fit`, `run` and the
loaders with one line (exit 2), and reported by `inspect` (exit 1), as docs/inspect.md documents."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from synth import MiB, truncate, zero_tail

from edgepilot.cli import app
from edgepilot.errors import UserError
from edgepilot.gguf.gguf_header import read_header
from edgepilot.gguf.resolve import resolve_model
from edgepilot.gguf.verdict import model_verdict

ARCH_KEY = b"general.architecture"


def _copy(src: Path, tmp_path: Path, name: str = "m.gguf") -> Path:
    dst = tmp_path / name
    shutil.copyfile(src, dst)
    return dst


def _refusal(res, *words: str) -> str:
    """Exit 2 and exactly one line on stderr that names the problem and where to see the details."""
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "edgepilot inspect" in lines[0] and "Traceback" not in res.output
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def _corrupt_arch_key(path: Path, replacement: bytes) -> None:
    data = path.read_bytes()
    at = data.index(ARCH_KEY)
    assert len(replacement) == len(ARCH_KEY)
    with path.open("r+b") as f:
        f.seek(at)
        f.write(replacement)


@pytest.fixture
def zero_tailed(smollm_path, tmp_path) -> Path:
    p = _copy(smollm_path, tmp_path, "zero-tail.gguf")
    zero_tail(p, 8 * MiB)  # a download preallocated and never finished
    return p


# --- a zero-filled tail: run refuses, fit plans and says so ---


def test_run_refuses_a_zero_filled_tail(zero_tailed):
    res = CliRunner().invoke(app, ["run", str(zero_tailed), "-p", "Hi", "-n", "4"])
    _refusal(res, "all zeros")


def test_fit_plans_a_zero_filled_tail_with_a_warning(zero_tailed):
    res = CliRunner().invoke(app, ["fit", str(zero_tailed), "--json"])
    assert res.exit_code == 0, res.output
    notes = json.loads(res.stdout)["notes"]
    assert any("zero-tail" in n and "all zeros" in n and "edgepilot run` refuses" in n for n in notes), notes
    table = CliRunner().invoke(app, ["fit", str(zero_tailed)])
    assert table.exit_code == 0 and "all zeros" in table.stdout


def test_loaders_share_the_verdict(zero_tailed, smollm_path):
    # serve, bench and tune resolve their MODEL through resolve_model before loading it
    with pytest.raises(UserError, match="all zeros"):
        resolve_model(zero_tailed)
    assert resolve_model(smollm_path) == smollm_path


def test_serve_refuses_a_zero_filled_tail_before_listening(zero_tailed):
    cmd = [sys.executable, "-m", "edgepilot", "serve", str(zero_tailed), "--port", "0"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("serve started on a damaged model")
    assert res.returncode == 2, res.stderr
    assert "all zeros" in res.stderr and len(res.stderr.strip().splitlines()) == 1


# --- truncation: everyone refuses, from the header alone ---


@pytest.mark.parametrize("keep", ["half", "one byte short"])
def test_fit_and_run_refuse_a_truncated_file(smollm_path, tmp_path, keep):
    p = _copy(smollm_path, tmp_path)
    size = p.stat().st_size
    truncate(p, size // 2 if keep == "half" else size - 1)
    _refusal(CliRunner().invoke(app, ["fit", str(p)]), "is damaged", "incomplete")
    _refusal(CliRunner().invoke(app, ["run", str(p), "-p", "Hi", "-n", "1"]), "incomplete")
    assert CliRunner().invoke(app, ["inspect", str(p)]).exit_code == 1


# --- the architecture key's name damaged ---


@pytest.mark.parametrize(
    ("replacement", "codes", "words"),
    [
        (b"\xffeneral.architectur\xfe", {"bad-key", "bad-metadata"}, "not readable text"),  # not text
        (b"general.architecturf", {"bad-metadata"}, "no general.architecture"),  # not the key llama.cpp reads
    ],
)
def test_a_damaged_architecture_key_is_refused_by_all_three(smollm_path, tmp_path, replacement, codes, words):
    p = _copy(smollm_path, tmp_path)
    _corrupt_arch_key(p, replacement)
    res = CliRunner().invoke(app, ["inspect", str(p), "--json"])
    assert res.exit_code == 1, res.output
    validation = json.loads(res.stdout)["validation"]
    assert validation["ok"] is False
    assert codes <= {q["code"] for q in validation["problems"]}
    _refusal(CliRunner().invoke(app, ["fit", str(p)]), words)
    _refusal(CliRunner().invoke(app, ["run", str(p), "-p", "Hi", "-n", "1"]))


def test_control_characters_in_a_key_stay_on_one_line(smollm_path, tmp_path):
    p = _copy(smollm_path, tmp_path)
    _corrupt_arch_key(p, b"general\n\x1b[2Jitecture")
    line = _refusal(CliRunner().invoke(app, ["fit", str(p)]))
    assert "\x1b" not in line


# --- headers damaged before any metadata: a verdict (exit 1), not bad input (exit 2) ---


@pytest.mark.parametrize(
    ("head", "code"),
    [
        (b"GGUF" + struct.pack("<I", 3) + b"\0" * 4, "truncated-header"),
        (b"GGUF" + struct.pack("<I", 7) + b"\0" * 16, "bad-version"),
        (b"GGUF" + struct.pack("<IQQ", 3, 2**40, 2**40) + b"\0" * 64, "bad-count"),
    ],
)
def test_inspect_gives_a_verdict_for_a_header_damaged_before_any_metadata(tmp_path, head, code):
    p = tmp_path / "early.gguf"
    p.write_bytes(head)
    res = CliRunner().invoke(app, ["inspect", str(p), "--json"])
    assert res.exit_code == 1, res.output
    assert code in {q["code"] for q in json.loads(res.stdout)["validation"]["problems"]}
    table = CliRunner().invoke(app, ["inspect", str(p)])
    assert table.exit_code == 1 and code in table.stdout and "Traceback" not in table.output
    _refusal(CliRunner().invoke(app, ["fit", str(p)]))


def test_not_a_gguf_file_stays_bad_input(tmp_path):
    p = tmp_path / "page.gguf"
    p.write_bytes(b"<!doctype html><title>401</title>")
    res = CliRunner().invoke(app, ["inspect", str(p)])
    assert res.exit_code == 2 and "not a GGUF model" in res.stderr


# --- the verdict itself ---


def test_purposes_differ_only_in_what_they_go_on_with(zero_tailed):
    inspect = model_verdict(zero_tailed, "inspect")
    plan = model_verdict(zero_tailed, "plan")
    load = model_verdict(zero_tailed, "load")
    assert [p.code for p in inspect.validation.problems] == ["zero-tail"] and inspect.refusal is None
    assert plan.refusal is None and plan.notes and plan.require() is plan
    assert load.refusal is not None and load.refusal.code == "zero-tail"
    with pytest.raises(UserError, match="is damaged: the last 8.0 MiB"):
        load.require()
    with pytest.raises(ValueError):
        model_verdict(zero_tailed, "guess")  # type: ignore[arg-type]


def test_real_models_pass_for_every_purpose(smollm_path, gemma_path):
    for path in (smollm_path, gemma_path):
        for purpose in ("inspect", "plan", "load"):
            v = model_verdict(path, purpose)
            assert v.validation.ok and v.refusal is None and not v.notes, (path, purpose)
    assert read_header(gemma_path).architecture == "gemma3"
