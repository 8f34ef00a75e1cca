"""Choosing the engine: flags and $EDGEPILOT_ENGINE, what each llama.cpp's --version and load log say, and
the installed version's flags; a binding whose libllama is another llama.cpp is refused in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from edgepilot.engine.choice import requested_engine
from edgepilot.engine.load_log import logged_buffers
from edgepilot.engine.native_tools import parse_version
from edgepilot.engine.tool_flags import adapt_to
from edgepilot.errors import UserError

LOGS = Path(__file__).resolve().parents[1] / "logs"
EDGEPILOT = [sys.executable, "-m", "edgepilot"]

# Debian sid's llama-server 0.7.0 at -lv 4 (SmolLM2 135M Q4_1, ctx 1024, -fa off), from the packaged lane
LOAD_LOG_0_7 = """\
0.00.410.642 I load_tensors:   CPU_Mapped model buffer size =    92.10 MiB
0.00.412.599 I llama_context:        CPU  output buffer size =     0.19 MiB
0.00.412.689 I llama_kv_cache:        CPU KV buffer size =    22.50 MiB
0.00.450.836 I llama_kv_cache: size =   22.50 MiB (  1024 cells,  30 layers,  1/1 seqs), K (f16):   11.25 MiB
0.00.468.496 I sched_reserve:        CPU compute buffer size =    27.51 MiB
""".splitlines()


def test_versions_of_a_packaged_and_a_built_llama_cpp():
    debian = parse_version("version: 0.7.0 (build 11669, commit Debian)\nbuilt with GNU 16.2.0", "path")
    assert debian is not None and (debian.number, debian.build, debian.commit) == ("0.7.0", 11669, "Debian")
    built = parse_version("version: 0.5.0-dev (build 0, commit unknown)\n", "built")
    assert built is not None and built.number == "0.5.0-dev" and built.source == "built"
    older = parse_version("version: 6580 (8ff20607)\nbuilt with cc", "path")
    assert older is not None and older.number == "6580" and older.commit == "8ff20607"
    assert debian.key != built.key and "/" not in debian.key
    assert parse_version("usage: llama-server [options]", "path") is None


def test_flags_an_installed_llama_cpp_lacks_are_dropped_or_respelled():
    argv = ["llama-server", "-m", "m.gguf", "-c", "512", "-lm", "none", "--cache-ram", "0", "--fit", "off"]
    old = frozenset({"-m", "-c", "--no-mmap", "--host", "-np"} | {f"--x{i}" for i in range(20)})
    assert adapt_to(old, argv) == ["llama-server", "-m", "m.gguf", "-c", "512", "--no-mmap"]
    new = old | {"-lm", "--cache-ram", "--fit"}
    assert adapt_to(new, argv) == argv


def test_buffer_sizes_from_a_newer_llama_cpps_load_log():
    b = logged_buffers(LOAD_LOG_0_7)
    mib = 1 << 20
    assert b.lines == 4
    assert (b.weights_bytes, b.kv_bytes, b.output_bytes) == (
        int(92.10 * mib),
        int(22.5 * mib),
        int(0.19 * mib),
    )
    assert b.compute_bytes == int(27.51 * mib) and b.repack_bytes == 0


def test_the_binding_version_read_from_its_dist_info_is_the_installed_one():
    from importlib.metadata import version

    from edgepilot.engine.native_tools import installed_binding

    assert installed_binding() == version("llama-cpp-python")


def test_engine_names_are_checked(monkeypatch):
    monkeypatch.setenv("EDGEPILOT_ENGINE", "Tools")
    assert requested_engine(None) == "tools"
    assert requested_engine("inprocess") == "inprocess"
    with pytest.raises(UserError, match="EDGEPILOT_ENGINE 'gpu' is not an engine"):
        monkeypatch.setenv("EDGEPILOT_ENGINE", "gpu")
        requested_engine(None)


@pytest.mark.parametrize("args", [["run", "-n", "1", "--engine", "cuda"], ["fit", "x.gguf", "--engine", "x"]])
def test_a_wrong_engine_is_one_line_and_exit_2(args):
    done = subprocess.run([*EDGEPILOT, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "is not an engine" in done.stderr


def test_a_libllama_from_another_llama_cpp_is_refused_in_one_line(tmp_path):
    """A real binding against a real shared library that lacks its functions (a stub compiled here)."""
    import shutil

    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    (tmp_path / "s.c").write_text("int stub(void) { return 0; }\n")
    for name in ("llama", "ggml", "ggml-base"):
        subprocess.run(
            ["cc", "-shared", "-fPIC", "-o", tmp_path / f"lib{name}.so", tmp_path / "s.c"], check=True
        )
    env = {"LLAMA_CPP_LIB_PATH": str(tmp_path), "PATH": "/usr/bin:/bin"}  # no llama.cpp programs either
    done = subprocess.run(
        [*EDGEPILOT, "run", "-n", "1", "--engine", "inprocess"],
        capture_output=True, text=True, timeout=120, env={**env, "HOME": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "another llama.cpp" in done.stderr and "unset LLAMA_CPP_LIB_PATH" in done.stderr


def test_a_cpu_runs_buffers_are_read_as_before_with_extra_types_apart():
    """An x86 CPU run with llama.cpp's extra buffer types: the repacked and AMX copies are kept apart from the
    plain weights; the totals the CPU calibration reads (KV, compute, output) are what they were."""
    log = [
        *LOAD_LOG_0_7,
        "0.00.410.700 I load_tensors:   CPU_REPACK model buffer size =    12.66 MiB",
        "0.00.410.701 I load_tensors:          AMX model buffer size =    28.12 MiB",
    ]
    b = logged_buffers(log)
    mib = 1 << 20
    assert b.lines == 6 and b.devices == {}
    assert (b.weights_bytes, b.repack_bytes, b.extra_bytes) == (
        int(92.10 * mib),
        int(12.66 * mib),
        int(28.12 * mib),
    )
    plain = logged_buffers(LOAD_LOG_0_7)
    assert (b.kv_bytes, b.compute_bytes, b.output_bytes) == (
        plain.kv_bytes,
        plain.compute_bytes,
        plain.output_bytes,
    )
    assert b.bytes_of("device") == 0 and b.bytes_of("host") == 0
