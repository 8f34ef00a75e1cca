"""Start-up is part of the interface on a phone: each command imports only what it uses. `--help` loads no
command's machinery; `probe` and `fit` load neither llama.cpp, numpy, gguf, the server stack, nor (with
--json) rich. Checked on the real entry point with `python -X importtime`, which names every module a process
imports, and, for the live probe, in the process itself: its modules and the libraries it mapped
(benchmarks/startup.py measures the time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import edgepilot

HEAVY = {"llama_cpp", "numpy", "gguf", "starlette", "uvicorn", "h11", "anyio", "jinja2", "diskcache"}
SRC = str(Path(edgepilot.__file__).resolve().parent.parent)
ARCHIVE = {"tarfile", "gzip"}  # only a snapshot archive given as --root needs them (shutil loads bz2, lzma)
# shutil loads bz2, lzma and zlib, hashlib OpenSSL (~10 and ~7 ms here): a program is found on PATH and a kept
# file's key and seal are hashed without them (program_path.py, digest.py)
LOADERS = {"shutil", "bz2", "lzma", "hashlib", "_hashlib"}
CPU_PLAN_SKIPS = {
    "edgepilot.device.probe",
    "edgepilot.device.gpu",
    "edgepilot.device.gpu_driver",
    "edgepilot.plan.offload",
    "edgepilot.plan.driver_prior",
    "edgepilot.engine.gpu_check",  # a remembered CPU check is read without the GPU check's modules
}


ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (SRC, os.environ.get("PYTHONPATH"))))}


def imported(*args: str) -> set[str]:
    """Every module `python -m edgepilot ARGS` imports (the command must succeed)."""
    env = ENV
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "edgepilot", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert lines, "python -X importtime printed nothing"
    return {line.rsplit("|", 1)[1].strip() for line in lines[1:]}  # the first line is the header


def tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_help_imports_click_and_the_command_table_only():
    modules = imported("--help")
    assert "click" in modules
    assert not tops(modules) & (HEAVY | {"rich", "psutil"})
    ours = {m for m in modules if m.startswith("edgepilot.")}
    light = ("edgepilot.errors", "edgepilot.defaults")  # one exception type, a few shared constants
    assert ours and all(m.startswith("edgepilot.cli") or m in light for m in ours), sorted(ours)


@pytest.mark.parametrize("command", [["fit", "--help"], ["serve", "--help"], ["run", "--help"]])
def test_a_command_help_loads_no_machinery(command):
    modules = imported(*command)
    assert not tops(modules) & (HEAVY | {"rich"})
    assert not {m for m in modules if m.startswith(("edgepilot.plan", "edgepilot.serve", "edgepilot.run"))}


def test_probe_json_reads_the_device_without_heavy_imports(devices):
    modules = imported("probe", "--json", "--root", str(devices / "sd8gen2-xiaomi13pro"))
    assert "edgepilot.device.probe" in modules
    assert not tops(modules) & (HEAVY | {"rich"})
    assert {m for m in modules if m.endswith("_cmd")} == {"edgepilot.cli.probe_cmd"}
    assert not modules & ARCHIVE, sorted(modules & ARCHIVE)  # a tree is no archive


def test_probe_table_imports_rich_but_nothing_heavy(devices):
    modules = imported("probe", "--root", str(devices / "sd8gen2-xiaomi13pro"))
    assert "rich.table" in modules
    assert not tops(modules) & HEAVY


def test_fit_json_plans_without_llama_cpp_numpy_or_gguf(smollm_path):
    modules = imported("fit", str(smollm_path), "--json")
    assert "edgepilot.tuned.decide" in modules and "edgepilot.gguf.gguf_header" in modules
    assert {m for m in modules if m.endswith("_cmd")} == {"edgepilot.cli.fit_cmd"}  # no other command
    assert not tops(modules) & (HEAVY | {"rich", "psutil"})  # psutil: ~12-70 ms for a core count
    assert "importlib.metadata" not in modules  # the binding's version comes from its dist-info
    # a CPU plan of a local file: no device probe, no offload or GPU driver, no snapshot archive
    assert not modules & (CPU_PLAN_SKIPS | ARCHIVE), sorted(modules & (CPU_PLAN_SKIPS | ARCHIVE))
    assert not modules & LOADERS, sorted(modules & LOADERS)


def test_importing_the_cli_loads_no_command_and_every_command_nothing_heavy():
    code = (
        "import sys, edgepilot.cli, edgepilot.cli.app; print(' '.join(sorted(sys.modules)))\n"
        "app = edgepilot.cli.app  # the group: the package's name for it hides the module's\n"
        "loaded = [app.get_command(None, name) for name in app.list_commands(None)]\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=ENV)
    assert done.returncode == 0, done.stderr[-2000:]
    cli, commands = (set(line.split()) for line in done.stdout.splitlines())
    assert "click" in cli and not {m for m in cli if m.endswith("_cmd")}, sorted(cli)
    assert "edgepilot.cli.bench_cmd" in commands and "edgepilot.cli.fit_cmd" in commands
    assert not tops(commands) & (HEAVY | {"rich", "matplotlib", "plotext", "psutil"})


# The CLI's main in this interpreter, then what the process holds: its modules and the libllama it mapped.
IN_PROCESS = """
import json, sys
from edgepilot.cli import main
args, report = json.loads(sys.argv[1]), sys.argv[2]
sys.argv, code = ["edgepilot", *args], 0
try:
    main()
except SystemExit as exc:
    code = exc.code
with open("/proc/self/maps") as maps:
    libllama = sorted({line.split()[-1] for line in maps if "libllama" in line})
with open(report, "w") as out:
    json.dump({"code": code, "modules": sorted(sys.modules), "libllama": libllama}, out)
"""


def in_process(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[dict, dict]:
    """`edgepilot ARGS` run in a fresh interpreter: (its JSON output, what the process held at the end)."""
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-c", IN_PROCESS, json.dumps(args), str(report)],
        capture_output=True, text=True, timeout=300, env={**ENV, **(env or {})},
    )  # fmt: skip
    held = json.loads(report.read_text())
    assert held["code"] == 0, done.stderr[-2000:]
    return json.loads(done.stdout), held


def test_a_live_probe_finds_the_engine_without_loading_llama_cpp(tmp_path):
    facts, held = in_process(tmp_path, "probe", "--json")
    assert not tops(set(held["modules"])) & (HEAVY | {"rich"}) and held["libllama"] == []
    # the binding's version is read from its dist-info: importlib.metadata alone costs more than the lookup
    assert "importlib.metadata" not in held["modules"]
    assert not set(held["modules"]) & LOADERS, sorted(set(held["modules"]) & LOADERS)
    engine = facts["engine"]
    assert engine["kind"] == "inprocess" and engine["checked"] is False, engine
    assert Path(engine["library"]).is_file() and Path(engine["library"]).parent == Path(engine["path"])
    assert engine["why"] == "llama-cpp-python found (not loaded)"


def test_probe_check_engine_runs_llama_cpp_in_a_child_and_says_what_it_found(tmp_path):
    """A library that crashes on this CPU ends the check's child, never probe (issue 40): probe itself does
    not load it."""
    facts, held = in_process(tmp_path, "probe", "--json", "--check-engine", "--no-gpu-check")
    engine = facts["engine"]
    assert engine["kind"] == "inprocess" and engine["checked"] is True, engine
    assert engine["why"] == "llama-cpp-python runs (checked in a child process)"
    assert "llama_cpp" not in held["modules"] and held["libllama"] == []
    check = engine["cpu_check"]
    assert check["outcome"] == "ok" and check["full"]["cached"] is False and check["full"]["checked_at"]
    assert os.path.realpath(check["target"]) == os.path.realpath(engine["library"])


def test_a_missing_libllama_is_found_missing_without_loading(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {
        "LLAMA_CPP_LIB_PATH": str(empty),
        "EDGEPILOT_TOOLS_DIR": str(empty),  # no built llama.cpp programs
        "PATH": os.path.dirname(sys.executable),  # nor any on PATH
    }
    facts, held = in_process(tmp_path, "probe", "--json", env=env)
    assert not tops(set(held["modules"])) & HEAVY and held["libllama"] == []
    engine = facts["engine"]
    assert engine["kind"] is None and engine["checked"] is False, engine
    assert f"llama-cpp-python has no libllama.so in LLAMA_CPP_LIB_PATH ({empty})" in engine["why"]


def test_check_engine_is_for_this_machine_only(devices):
    root = str(devices / "sd8gen2-xiaomi13pro")
    done = subprocess.run(
        [sys.executable, "-m", "edgepilot", "probe", "--root", root, "--check-engine"],
        capture_output=True, text=True, timeout=120, env=ENV,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--check-engine" in done.stderr and "--root" in done.stderr
