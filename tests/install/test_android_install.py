"""The CI check that installing edgepilot on Android (Termux) compiles nothing but what Termux ships as
packages, numpy and psutil (.ci/check_android_install.py), on pip reports recorded here. They were resolved
by pip on a SIMULATED Android interpreter (tests/android/sim: this machine's Python reporting PEP 738's
platform), so markers and wheel tags are Android's: the closure before issue 21 (llama-cpp-python, plotext's
C++ kernel and markupsafe built on the phone) must fail, the current one must pass, a closure resolved for
Linux is refused, and the recorded one must be what pyproject.toml's markers ask for on Android. CI runs the
same script on a fresh resolution."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SCRIPT = ROOT / ".ci" / "check_android_install.py"
# PEP 508 marker values on Termux (PEP 738): what pip evaluates pyproject's markers with there
ANDROID = {"sys_platform": "android", "platform_system": "Android", "os_name": "posix",
           "python_version": "3.13", "python_full_version": "3.13.0", "platform_machine": "aarch64",
           "implementation_name": "cpython", "platform_python_implementation": "CPython"}  # fmt: skip


def _check(report: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--report", str(report)], capture_output=True, text=True, timeout=60
    )


def _with(tmp_path: Path, name: str, file: str) -> Path:
    """The recorded Android closure plus one file."""
    report = json.loads((HERE / "report-android.json").read_text())
    url = "https://files.pythonhosted.org/packages/" + file
    report["install"].append({"metadata": {"name": name, "version": "1.0"}, "download_info": {"url": url}})
    (tmp_path / "r.json").write_text(json.dumps(report))
    return tmp_path / "r.json"


def _names(report: Path) -> set[str]:
    items = json.loads(report.read_text())["install"]
    return {re.sub(r"[-_.]+", "-", item["metadata"]["name"]).lower() for item in items}


def test_the_closure_before_issue_21_is_refused():
    done = _check(HERE / "report-android-before-issue-21.json")
    assert done.returncode == 1, done.stdout
    for name in ("llama-cpp-python", "plotext", "markupsafe"):
        assert f"{name}: built from source on the phone" in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 3


def test_the_android_closure_passes():
    done = _check(HERE / "report-android.json")
    assert done.returncode == 0, done.stderr
    assert "16 packages to install on Android besides Termux's numpy and psutil, none compiled" in done.stdout


def test_a_closure_resolved_for_linux_is_not_taken_for_android_s():
    done = _check(HERE / "report-default.json")  # check_no_rust's: resolved on this Linux machine
    assert done.returncode == 1
    assert "not resolved for Android" in done.stderr
    assert "numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64" in done.stderr  # a wheel Termux cannot use


def test_termux_s_own_packages_must_not_be_built(tmp_path):
    done = _check(_with(tmp_path, "numpy", "numpy-2.4.6.tar.gz"))
    assert done.returncode == 1 and "instead of using Termux's python-numpy" in done.stderr


def test_a_wheel_built_for_android_is_fine(tmp_path):
    assert _check(_with(tmp_path, "pkg", "pkg-1.0-cp313-cp313-android_24_arm64_v8a.whl")).returncode == 0
    done = _check(_with(tmp_path, "pkg", "pkg-1.0.tar.gz"))  # an sdist nobody has checked
    assert done.returncode == 1 and "pkg: built from source on the phone" in done.stderr


def test_the_recorded_closure_is_what_pyproject_asks_for_on_android():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(spec) for spec in project["dependencies"]]
    on_android = {r.name.lower() for r in wanted if r.marker is None or r.marker.evaluate(ANDROID)}
    not_on_android = {r.name.lower() for r in wanted} - on_android
    recorded = _names(HERE / "report-android.json")
    assert {"llama-cpp-python", "plotext"} <= not_on_android
    assert not not_on_android & recorded
    assert on_android - {"numpy", "psutil"} <= recorded, "re-record: .ci/check_android_install.py --save"
    assert not {"numpy", "psutil"} & recorded  # Termux's packages, installed before pip runs
