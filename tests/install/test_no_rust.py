"""The CI check that the default install builds on Termux (.ci/check_no_rust.py), on pip reports recorded
here: the closure before issue 14 (typer and llama-cpp-python[server] pulled pydantic-core) must fail it, the
current one must pass, and the recorded current one must still be what pyproject.toml asks for. CI runs the
same script on a fresh resolution."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SCRIPT = ROOT / ".ci" / "check_no_rust.py"


def _check(report: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--report", str(report)], capture_output=True, text=True, timeout=60
    )


def test_the_closure_before_issue_14_is_refused():
    done = _check(HERE / "report-before-issue-14.json")
    assert done.returncode == 1, done.stdout
    assert "pydantic-core: needs Rust" in done.stderr
    # compiled packages nobody has reviewed are named too, with what to do
    assert "pyyaml: compiled" in done.stderr and "CHECKED_COMPILED" in done.stderr


def test_the_default_closure_passes():
    done = _check(HERE / "report-default.json")
    assert done.returncode == 0, done.stderr
    assert "23 packages in the default install, none needs Rust" in done.stdout


def test_a_new_rust_dependency_fails(tmp_path):
    report = json.loads((HERE / "report-default.json").read_text())
    url = "https://files.pythonhosted.org/packages/jiter-0.19.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    jiter = {"metadata": {"name": "Jiter", "version": "0.19.0"}, "download_info": {"url": url}}
    report["install"].append(jiter)
    (tmp_path / "r.json").write_text(json.dumps(report))
    done = _check(tmp_path / "r.json")
    assert done.returncode == 1 and "jiter: needs Rust" in done.stderr


def test_the_recorded_closure_is_the_one_pyproject_asks_for():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    wanted = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    direct = {re.split(r"[\[<>=!~; ]", spec, maxsplit=1)[0].lower().replace("_", "-") for spec in wanted}
    recorded = json.loads((HERE / "report-default.json").read_text())["install"]
    names = {item["metadata"]["name"].lower().replace("_", "-") for item in recorded}
    assert direct <= names, f"re-record tests/install/report-default.json: {sorted(direct - names)} missing"
    assert not {"pydantic", "pydantic-core", "fastapi", "typer", "gguf"} & names
