"""A llama.cpp that faults on this CPU (a native build's AMX kernels on a VM) cannot take edgepilot down.

The fault is real and comes from inside llama.cpp's matrix multiply on a prompt batch: sigill_shim.c, loaded
with LD_PRELOAD, takes the place of ggml's repacked Q4_K GEMM and executes ud2 there (what an AMX or i8mm
kernel does on a CPU that will not run it). The bundled Gemma 3 (Q4_K_M) reaches it on any prompt batch of
more than a few tokens with repacking on, as a run has it; without repacking the plain kernels run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nativekit import REQUIRE_ENV, native_tool

HERE = Path(__file__).resolve().parent
PROMPT = ["-p", "Say hello to the little robot", "-n", "4", "--temp", "0"]


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail("no C compiler for the SIGILL shim")
        pytest.skip("no C compiler for the SIGILL shim")
    out = tmp_path_factory.mktemp("shim") / "libsigill_shim.so"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(HERE / "sigill_shim.c"), "-ldl"], check=True
    )
    return out


def _env(shim: Path, data: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EP_SIGILL")}
    return {**env, "LD_PRELOAD": str(shim), "EDGEPILOT_DATA_DIR": str(data), **more}


def _edgepilot(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "edgepilot", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


def _inprocess_available() -> None:
    from edgepilot.engine.llama_binding import find_library

    found = find_library()
    if found is None or found[0] is None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"llama-cpp-python {found[1] if found else 'cannot be found'}")
        pytest.skip("the in-process engine has no library here (`edgepilot build` makes it)")


def test_the_fault_is_in_the_repacked_matrix_multiply_of_a_prompt_batch(shim, gemma_path, tmp_path):
    """Without edgepilot's check, llama.cpp dies with SIGILL on the prompt batch, and only with repacking."""
    _inprocess_available()
    completion = native_tool("llama-completion")
    env = _env(shim, tmp_path)
    child = [sys.executable, "-m", "edgepilot.engine.cpu_check_child", str(gemma_path)]
    repacked = subprocess.run([*child, "1", "2"], capture_output=True, text=True, env=env, timeout=300)
    assert repacked.returncode == -signal.SIGILL, repacked.stderr[-2000:]
    plain = subprocess.run([*child, "0", "2"], capture_output=True, text=True, env=env, timeout=300)
    assert plain.returncode == 0 and "edgepilot-cpu-check: ok" in plain.stdout, plain.stderr[-2000:]
    one_token = [str(completion), "-m", str(gemma_path), "-p", "Hi", "-n", "2", "-no-cnv", "-dev", "none"]
    decoded = subprocess.run(one_token, capture_output=True, text=True, env=env, timeout=300)
    assert decoded.returncode == 0, decoded.stderr[-2000:]  # a 2-token prompt never reaches the GEMM
    long_prompt = [*one_token[:4], " ".join(["robots count prime numbers"] * 12), *one_token[5:]]
    batch = subprocess.run(long_prompt, capture_output=True, text=True, env=env, timeout=300)
    assert batch.returncode == -signal.SIGILL, batch.stderr[-2000:]


@pytest.mark.parametrize("engine", ["inprocess", "tools"])
def test_run_answers_without_repacking_and_says_why_once(engine, shim, gemma_path, tmp_path):
    if engine == "inprocess":
        _inprocess_available()
    else:
        native_tool("llama-server")
        native_tool("llama-completion")
    env = _env(shim, tmp_path / "data")
    first = _edgepilot("run", str(gemma_path), "--engine", engine, "--json", *PROMPT, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    result = json.loads(first.stdout)
    assert result["settings"]["repack"] is False and result["n_gen"] > 0
    (note,) = [n for n in result["notes"] if "crashed on this CPU" in n]
    assert "SIGILL" in note and "--no-repack" in note and "GGML_NATIVE=ON" not in note
    fix = 'CMAKE_ARGS="-DGGML_NATIVE=OFF' if engine == "inprocess" else "edgepilot build"
    assert fix in note
    assert "--no-repack" in result["llama_cpp_args"]  # what it prints to paste runs too
    kept = json.loads((tmp_path / "data" / "cpu-checks.json").read_text())
    (modes,) = kept["checks"].values()
    assert modes["full"]["outcome"] == "crashed" and modes["plain"]["outcome"] == "ok"
    assert modes["full"]["checked_at"]
    again = _edgepilot("run", str(gemma_path), "--engine", engine, "--json", *PROMPT, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    check = json.loads(again.stdout)["engine"]["cpu_check"]
    assert check["full"]["cached"] is True and check["outcome"] == "crashed" and check["runs_without_repack"]


def test_a_library_that_crashes_anyway_gives_way_to_the_other_engine(shim, gemma_path, tmp_path):
    _inprocess_available()
    native_tool("llama-server")
    native_tool("llama-completion")
    env = _env(shim, tmp_path / "data", EP_SIGILL_MODE="everywhere", EP_SIGILL_ONLY="python")
    done = _edgepilot("run", str(gemma_path), "--json", *PROMPT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["engine"]["kind"] == "tools" and result["n_gen"] > 0
    (note,) = [n for n in result["notes"] if "crashed on this CPU" in n]
    assert "llama-cpp-python crashed" in note and "using tools instead" in note
    assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF' in note


def test_nothing_that_runs_is_one_line_with_the_rebuild(shim, gemma_path, tmp_path):
    _inprocess_available()
    env = _env(shim, tmp_path / "data", EP_SIGILL_MODE="everywhere")
    done = _edgepilot("run", str(gemma_path), "--engine", "inprocess", *PROMPT, env=env)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and len([ln for ln in lines if "error" in ln.lower()]) == 1
    assert "crashes on this CPU" in lines[-1] and 'CMAKE_ARGS="-DGGML_NATIVE=OFF' in lines[-1]


def test_probe_check_engine_runs_the_library_in_a_child(shim, tmp_path):
    _inprocess_available()
    env = _env(shim, tmp_path / "data")
    done = _edgepilot("probe", "--check-engine", "--no-gpu-check", "--json", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    engine = json.loads(done.stdout)["engine"]
    assert engine["kind"] == "inprocess" and engine["no_repack"] is True
    assert (
        engine["cpu_check"]["full"]["signal"] == "SIGILL" and engine["cpu_check"]["plain"]["outcome"] == "ok"
    )


def test_the_doctor_proposes_what_runs_here_and_it_runs(shim, gemma_path, tmp_path):
    completion = native_tool("llama-completion")
    env = _env(shim, tmp_path / "data")
    crashing = [str(completion), "-m", str(gemma_path), "-no-cnv", "-n", "2", "-dev", "none"]
    crashing += ["-p", " ".join(["robots count prime numbers"] * 12)]
    done = _edgepilot("doctor", "--json", "--", *crashing, env=env)
    report = json.loads(done.stdout)
    first = report["causes"][0]
    assert first["id"] == "illegal-instruction", report["causes"]
    # the build that ran is this CPU's portable set (edgepilot build) and faulted all the same: not native
    # again, nor the same flags, but kernels picked at run time
    assert "GGML_NATIVE=ON" not in first["fix"] and "-DGGML_CPU_ALL_VARIANTS=ON" in first["fix"]
    assert any(e.startswith("the build that ran was compiled with: ") for e in first["evidence"])
    (fixed,) = first["fix_commands"]
    assert fixed != crashing and fixed[: len(crashing)] == crashing and "--no-repack" in fixed
    rerun = subprocess.run(fixed, capture_output=True, text=True, env=env, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]


def test_tune_checks_a_remembered_crash_again(tmp_path, monkeypatch):
    """A crash is remembered with when it was seen; tune does not trust it: the library may have been rebuilt
    with the same file name, or the crash was the machine's (a timeout never is kept at all)."""
    _inprocess_available()
    from edgepilot.engine import choice, cpu_check
    from edgepilot.engine import cpu_check_store as store
    from edgepilot.engine.llama_binding import find_library

    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path))
    library = find_library()[0]
    key = store.check_key("inprocess", cpu_check._files("inprocess", library), cpu_check._cpu_flags())
    crashed = {"outcome": "crashed", "mode": "full", "seconds": 1.0, "detail": "SIGILL", "signal": "SIGILL"}
    plain = {**crashed, "outcome": "ok", "mode": "plain", "signal": None}
    store.store(key, {"full": crashed, "plain": plain})
    monkeypatch.setattr(choice, "_checked", {})
    assert choice.choose_engine("inprocess", load=False).no_repack  # fit and probe: what is remembered
    info = choice.choose_engine("inprocess", tool="llama-bench", fresh="failed")  # tune's way
    assert info.cpu_check["outcome"] == "ok" and info.cpu_check["full"]["cached"] is False
    assert not info.no_repack and store.load(key)["full"]["outcome"] == "ok"
