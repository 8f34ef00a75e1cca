"""One compile for both engines: llama-cpp-python installed without its library
(`CMAKE_ARGS=-DLLAMA_BUILD=OFF`) loads the libllama `edgepilot build` made from the same vendored
llama.cpp."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def test_a_binding_without_its_library_runs_on_the_built_one(native_build, tmp_path):
    spec = importlib.util.find_spec("llama_cpp")  # where it is, without loading a library (run alone)
    assert spec is not None and spec.origin is not None
    package = Path(spec.origin).parent
    copy = tmp_path / "site" / "llama_cpp"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("lib", "__pycache__"))
    assert not (copy / "lib").exists()  # what a -DLLAMA_BUILD=OFF wheel holds
    env = {k: v for k, v in os.environ.items() if k != "LLAMA_CPP_LIB_PATH"}
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join([str(copy.parent), src])
    probe = "import llama_cpp, os; print(llama_cpp.__file__); print(os.environ['LLAMA_CPP_LIB_PATH'])"
    cmd = [sys.executable, "-c", f"from edgepilot.engine.llama_binding import load; load(); {probe}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-1500:]
    where, lib = done.stdout.split()
    assert where.startswith(str(copy)) and lib == native_build.bin_dir
    run = [sys.executable, "-m", "edgepilot", "run", "--engine", "inprocess", "-n", "4", "--temp", "0"]
    run.append("--json")
    done = subprocess.run(run, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-1500:]
    result = json.loads(done.stdout)
    assert result["engine"]["kind"] == "inprocess" and result["n_gen"] == 4
