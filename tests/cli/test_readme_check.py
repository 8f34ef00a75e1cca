"""The README's shown outputs still come from the current code: scripts/readme_check.py runs them (CI runs it
through this test) and compares their shape."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "readme_check.py"


@pytest.fixture(scope="module")
def rc():
    spec = importlib.util.spec_from_file_location("readme_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_check"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("fits: predicted peak 441.5 MiB of a 299.8 MiB budget", "fits: predicted peak N"),
        ("to fit: without --flash-attn the same context", "to fit: without --flash-attn the"),
        ("memory   15.36 GiB total · 13.56 GiB available", "memory N GiB"),
        ("quantization     Q4_1 · 5.74 bits per weight", "quantization QN_N ·"),
        ("storage /home/orangepi: ext4 on / (ok)", "storage PATH: extN on PATH"),
        ("│ 4,5,6,7 │ Cortex-A76 │    2400 │ performance │", "│ 4 cols: N"),
        ("┃ cpus    ┃ core       ┃ max MHz ┃ kind        ┃", "┃ 4 cols: cpus | core | max MHz | kind"),
        ("┏━━━━━━━━━┳━━━━━━━━━━━━┓", "border"),
        ("   evidence: #00 0x0000000000000000 <unknown>", "evidence: #N NxN <unknown>"),
        ("", ""),
    ],
)
def test_line_kind_masks_numbers_and_paths(rc, line, kind):
    assert rc.line_kind(line) == kind


def test_machine_figures_do_not_change_the_kind_but_labels_do(rc):
    a = "fits: predicted peak 282.8 MiB of a 299.8 MiB budget (MemAvailable, 768.0 MiB kept free)"
    b = "fits: predicted peak 5147.3 MiB of a 7168.0 MiB budget (--budget, 0.0 MiB kept free)"
    assert rc.line_kind(a) == rc.line_kind(b)
    assert rc.line_kind(a) != rc.line_kind("does not fit: predicted peak 282.8 MiB")
    assert rc.line_kind("prompt 14 tok @ 53.1 t/s") != rc.line_kind("first token 173 ms · prompt 41 tok")


def test_an_elision_stands_for_any_number_of_lines(rc):
    produced = ["fits: peak 1 MiB", "a 1", "b 2", "settings: ctx 4096", "c"]
    assert rc.align(["fits: peak 9 MiB", "(...)", "settings: ctx 512", "(...)"], produced) == [
        0,
        None,
        3,
        None,
    ]
    assert rc.align(["fits: peak 9 MiB", "settings: ctx 512"], produced) is None


def test_write_keeps_the_readmes_elisions(rc):
    shown = ["fits: peak 9 MiB", "(...)", "fix: run on the CPU; ..."]
    produced = ["fits: peak 1 MiB", "a", "b", "fix: run on the CPU; and more words"]
    pairs = rc.align(shown, produced)
    assert rc.rewrite(shown, produced, pairs) == ["fits: peak 1 MiB", "(...)", "fix: run on the CPU; ..."]


def test_the_readme_outputs_have_the_shape_of_the_current_code():
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
    )
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = proc.stdout.strip().splitlines()[-1]
    assert "0 differ" in summary and "commands checked" in summary and "skipped" in summary
