"""The SIMULATED Android interpreter (sim/sitecustomize.py) reports what PEP 738 says Android's Python does,
reproduces the failure of issue 21 (llama-cpp-python 0.3.36's loader refuses "android"), and under it
edgepilot's binding loads the real libllama. This machine is not Android: only what Python reports changes."""

from __future__ import annotations

import ast
from pathlib import Path

from simkit import SRC, python


def test_the_child_reports_android_as_pep_738_says(simulated_android):
    assert simulated_android == {
        "sys_platform": "android",
        "platform_system": "Android",
        "api_level": 24,  # Termux's minimum
        "android_ver_api_level": 24,
        "sysconfig_platform": simulated_android["sysconfig_platform"],
        "uname_sysname": "Linux",  # Android's kernel is Linux; PEP 738 leaves os.uname() alone
    }
    assert simulated_android["sysconfig_platform"].startswith("android-24-")


def test_psutil_works_there_as_termux_s_patched_one_does():
    done = python("import psutil, sys; print(sys.platform, psutil.virtual_memory().total > 0)")
    assert done.stdout.split() == ["android", "True"], done.stderr


def test_plain_import_llama_cpp_fails_there_as_on_termux():
    """The bug the simulation exists for: llama-cpp-python's own import refuses the platform."""
    done = python("import llama_cpp")
    assert done.returncode != 0
    assert "RuntimeError: Unsupported platform" in done.stderr


def test_the_binding_loads_the_real_libllama_there():
    code = """
import sys
from edgepilot.engine.llama_binding import binding_available, llama_cpp
ok, why = binding_available()
maps = open("/proc/self/maps").read()
print(sys.platform, ok, why, "libllama.so" in maps, llama_cpp.llama_max_devices() >= 1, llama_cpp.__version__,
      sep="|")
"""
    done = python(code)
    assert done.returncode == 0, done.stderr
    platform, ok, why, mapped, devices, version = done.stdout.strip().split("|")
    assert (platform, ok, why, mapped, devices) == ("android", "True", "", "True", "True")
    assert version.startswith("0.3.")


def test_the_binding_loads_after_a_plain_import_failed_half_way():
    """A failed `import llama_cpp` leaves llama-cpp-python's unpatched loader module in sys.modules."""
    code = """
try:
    import llama_cpp
except RuntimeError as exc:
    print(exc)
from edgepilot.engine.llama_binding import binding_available
print(binding_available()[0])
"""
    done = python(code)
    assert done.stdout.split("\n")[:2] == ["Unsupported platform", "True"], done.stderr


def test_a_broken_or_missing_library_is_one_line_not_a_traceback(tmp_path):
    broken, empty = tmp_path / "broken", tmp_path / "empty"
    broken.mkdir()
    empty.mkdir()
    (broken / "libllama.so").write_bytes(b"not an ELF file")
    for folder, reason in ((broken, "Failed to load shared library"), (empty, "'llama' not found")):
        code = f"""
import os
os.environ["LLAMA_CPP_LIB_PATH"] = {str(folder)!r}
from edgepilot.engine.llama_binding import binding_available
ok, why = binding_available()
print(ok, why, sep="|")
"""
        done = python(code)
        assert done.returncode == 0, done.stderr
        ok, why = done.stdout.rstrip("\n").split("|")
        assert ok == "False" and why.startswith("failed to load (") and reason in why, why
        assert "\n" not in why


def test_not_installed_is_said_so():
    done = python(
        "import sys; sys.modules['llama_cpp'] = None\n"
        "from edgepilot.engine.llama_binding import binding_available; print(binding_available())"
    )
    assert done.stdout.strip() == "(False, 'is not installed')", done.stderr


def test_linux_only_features_accept_android_s_kernel():
    code = (
        "from edgepilot.device.system import linux_kernel, android_python\n"
        "from edgepilot.doctor.cgroup import cgroup_problem\n"
        "print(linux_kernel(), android_python(), cgroup_problem())"
    )
    done = python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("True True ")
    assert "need Linux cgroups" not in done.stdout


def _platform_comparisons(tree: ast.AST) -> list[str]:
    """`sys.platform == "linux"`, `sys.platform.startswith("linux")`, `platform.system() == "Linux"`..."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Compare, ast.Call)):
            continue
        text = ast.unparse(node)
        consts = [c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
        asks_platform = "sys.platform" in text or "platform.system()" in text
        if asks_platform and any(c.lower().startswith("linux") for c in consts):
            found.append(text)
    return found


def test_nothing_in_edgepilot_takes_linux_for_not_android():
    """Android is Linux too: a check for the Linux kernel goes through edgepilot.device.system."""
    wrong = []
    for path in Path(SRC, "edgepilot").rglob("*.py"):
        if path.relative_to(SRC).as_posix() == "edgepilot/device/system.py":
            continue  # the one place that knows
        for text in _platform_comparisons(ast.parse(path.read_text(encoding="utf-8"))):
            wrong.append(f"{path.name}: {text}")
    assert not wrong, wrong
    # the checker itself sees what it is for
    assert _platform_comparisons(ast.parse('if sys.platform != "linux": pass'))
    assert _platform_comparisons(ast.parse('x = platform.system() == "Linux"'))
    assert _platform_comparisons(ast.parse('x = sys.platform.startswith("linux")'))
    assert not _platform_comparisons(ast.parse('x = sys.platform == "darwin"'))
