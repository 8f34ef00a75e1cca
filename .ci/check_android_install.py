#!/usr/bin/env python3
"""CI: installing edgepilot on Android (Termux) compiles nothing, apart from what Termux ships as packages.

Termux's pip gets no wheels for Android from PyPI for most compiled packages, so everything it resolves to
an sdist is built on the phone. Termux ships numpy and psutil as packages (`pkg install python-numpy
python-psutil`); nothing else in the default install may need a compiler there.

How: pip's own resolver, run (`install --dry-run --report`: nothing built or installed, no sdist compiled) on
an interpreter that reports Android's platform as PEP 738 specifies: tests/android/sim/sitecustomize.py, a
SIMULATION on this machine's Python (sys.platform "android", platform.system() "Android", API level 24,
sysconfig platform android-24-<abi>). So pip evaluates every environment marker (`sys_platform`,
`platform_system`) as Termux's pip does, and picks only wheels tagged for Android or for any platform. The
interpreter is a fresh venv without packages; numpy's and psutil's metadata (the versions installed here) on
its path stand in for `pkg install python-numpy python-psutil`, so pip treats them as installed, as on Termux.
The report must say it was resolved for Android (its `environment` block), and hold no sdist and no wheel
built for another platform. Not simulated: the Python version (markers on python_version evaluate for
this interpreter's, Termux's is 3.13+) and the CPU (the Android ABI named is this machine's). Needs the
package index (like check_no_rust.py); ~5-15 s here, mostly pip preparing edgepilot's own metadata.

    python .ci/check_android_install.py [--report REPORT.json] [--save OUT.json] [PROJECT_DIR]

--report checks a report pip already wrote instead of resolving (the tests use it); --save writes the
resolved closure as tests/install/report-android.json records it (no local paths). Exit 0: nothing to
compile on Android; 1: something would compile there (named); 2: could not resolve (pip's error, or numpy or
psutil missing from the interpreter running this).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pip_check  # noqa: E402  (.ci/ is not a package)
from pip_check import ROOT, normalize  # noqa: E402

SIM = ROOT / "tests" / "android" / "sim"
# Compiled, but installed by Termux's package manager before pip runs (README's set-up, docs/android.md).
TERMUX_SHIPS = {"numpy": "python-numpy", "psutil": "python-psutil"}
# Projects published as an sdist only whose build was checked to compile nothing (pure Python): none so far.
PURE_SDISTS: set[str] = set()
MARKERS_KEPT = ("sys_platform", "platform_system", "os_name", "python_version", "platform_machine")


def wheel_platforms(file: str) -> list[str]:
    return file[:-4].split("-")[-1].split(".")


def problem(name: str, url: str) -> str | None:
    """What is wrong with installing this file on Android, or None."""
    file = url.rsplit("/", 1)[-1]
    if file.endswith(".whl"):
        other = [p for p in wheel_platforms(file) if p != "any" and not p.startswith("android_")]
        return f"{name}: {file} is built for another platform than Android" if other else None
    if name in TERMUX_SHIPS:
        return (
            f"{name}: pip would build it from source ({file}) instead of using Termux's "
            f"{TERMUX_SHIPS[name]}: is the version pyproject.toml asks for newer than Termux's?"
        )
    if name in PURE_SDISTS:
        return None
    return (
        f"{name}: built from source on the phone ({file}); make it optional on Android (a marker), or, "
        "if its build compiles nothing, add it to PURE_SDISTS"
    )


def check(report: dict) -> tuple[list[str], list[str]]:
    """(every package pip would install on Android, what is wrong)."""
    env = report.get("environment", {})
    wrong = []
    if env.get("sys_platform") != "android" or env.get("platform_system") != "Android":
        wrong.append(
            f"the report was not resolved for Android (sys_platform {env.get('sys_platform')!r}, "
            f"platform_system {env.get('platform_system')!r})"
        )
    names = []
    for item in report.get("install", []):
        info = item.get("download_info", {})
        if "dir_info" in info:  # the project itself
            continue
        name = normalize(item["metadata"]["name"])
        names.append(name)
        why = problem(name, info.get("url", ""))
        if why:
            wrong.append(why)
    return names, wrong


def termux_packages(folder: Path) -> None:
    """numpy's and psutil's metadata, as if Termux's packages had installed them."""
    for name in TERMUX_SHIPS:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            print(f"check_android_install: {name} is not installed here: run this from the project's venv",
                  file=sys.stderr)  # fmt: skip
            sys.exit(2)
        info = folder / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "INSTALLER").write_text("termux (simulated)\n")


def resolve(project: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        venv, shipped, out = Path(tmp) / "venv", Path(tmp) / "termux", Path(tmp) / "report.json"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        termux_packages(shipped)
        python = venv / "bin" / "python"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SIM), str(shipped)])}
        cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run", "--quiet"]
        cmd += ["--report", str(out), str(project)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            sys.exit(2)
        return json.loads(out.read_text(encoding="utf-8"))


def trimmed(report: dict) -> dict:
    """The trimmed report (no path of this machine), with the environment it was resolved for."""
    env = {k: v for k, v in report.get("environment", {}).items() if k in MARKERS_KEPT}
    return {**pip_check.trimmed(report), "environment": env}


def main(argv: list[str] | None = None) -> int:
    return pip_check.main(
        argv,
        name="check_android_install",
        doc=__doc__,
        resolve=resolve,
        check=check,
        trim=trimmed,
        passed=lambda names: (
            f"{len(names)} packages to install on Android besides Termux's {' and '.join(TERMUX_SHIPS)}, "
            "none compiled"
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
