"""Run Python and the real `edgepilot` CLI on the SIMULATED Android interpreter (sim/sitecustomize.py).

The child is this machine's Python with sim/ first on PYTHONPATH: it reports what PEP 738 says Android's
Python reports (sys.platform "android", platform.system() "Android", sys.getandroidapilevel()). It is not
Android: kernel, libc and llama.cpp build are this machine's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import edgepilot

SIM = Path(__file__).resolve().parent / "sim"
SRC = str(Path(edgepilot.__file__).resolve().parent.parent)  # this checkout, as the parent imports it
TIMEOUT = 300  # python + llama.cpp on a busy 2-core machine


def sim_pythonpath() -> str:
    return os.pathsep.join(filter(None, (str(SIM), SRC, os.environ.get("PYTHONPATH"))))


def android_env(**extra: str) -> dict[str, str]:
    """os.environ for a child that runs on the simulated Android interpreter (its children too)."""
    return {**os.environ, "PYTHONPATH": sim_pythonpath(), "COLUMNS": "200", **extra}


def python(code: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """`python -c CODE` on the simulated Android interpreter."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=android_env()
    )


def edgepilot_cli(
    *args: str,
    stdin: str | None = None,
    timeout: float = TIMEOUT,
    engine: str | None = "inprocess",
    android: bool = True,
) -> subprocess.CompletedProcess[str]:
    """`python -m edgepilot ARGS` on the simulated Android interpreter (android=False: on this machine's own,
    to compare with). The lane is about the in-process engine loading there, so it is asked for
    ($EDGEPILOT_ENGINE) unless engine is None (auto)."""
    env = android_env() if android else {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200"}
    env.pop("EDGEPILOT_ENGINE", None)
    if engine is not None:
        env["EDGEPILOT_ENGINE"] = engine
    return subprocess.run(
        [sys.executable, "-m", "edgepilot", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


PLATFORM_REPORT = """
import json, os, platform, sys, sysconfig
print(json.dumps({
    "sys_platform": sys.platform,
    "platform_system": platform.system(),
    "api_level": sys.getandroidapilevel(),
    "android_ver_api_level": platform.android_ver().api_level,
    "sysconfig_platform": sysconfig.get_platform(),
    "uname_sysname": os.uname().sysname,
}))
"""
