"""`edgepilot build --vulkan` without compiling: the fix applied to the engine's real ggml-vulkan.cpp,
refused on a source it does not fit, the flags and stamp, and the checks that run before any work. The build
itself, and a run on the lying driver with it, are in tests/gpu/test_old_mali_fix.py (the GPU lane)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edgepilot.device.gpu_verdict import NamedDevice, final_verdict, fix_state, judge
from edgepilot.device.llama_build import vulkan_fix_of
from edgepilot.errors import UserError
from edgepilot.toolchain import vulkan_fix
from edgepilot.toolchain.vulkan_build import stale_fix, wants_vulkan


@pytest.fixture
def vendored(native_build, tmp_path: Path) -> Path:
    """A copy of the engine's vendored ggml-vulkan.cpp, as `edgepilot build` unpacked it, unfixed."""
    from edgepilot.toolchain.source import fetch_sdist, unpack_llama_cpp

    home = Path(native_build.stamp).parent
    archive = fetch_sdist(native_build.engine_version, home.parent / "sdist")
    src = unpack_llama_cpp(archive, native_build.engine_version, tmp_path / "src")
    assert not vulkan_fix.is_applied(src)
    return src


def test_the_fix_applies_once_to_the_engines_source(vendored: Path) -> None:
    target = vendored / vulkan_fix.TARGET
    before = target.read_text()
    vulkan_fix.apply_fix(vendored)
    after = target.read_text()
    assert vulkan_fix.is_applied(vendored)
    for edit in vulkan_fix.EDITS:
        assert edit.new in after
    assert "device->buffer_device_address = vk12_features.bufferDeviceAddress;" in after  # read from the view
    assert "if (api_version < VK_API_VERSION_1_1) {" in after and "Vulkan 1.2 required" not in after
    assert len(after) > len(before)
    vulkan_fix.apply_fix(vendored)  # a second time changes nothing
    assert target.read_text() == after


def test_a_source_fixed_by_another_version_is_unpacked_again(vendored: Path) -> None:
    """The id in the file, not only in the stamp: a changed fix never compiles the old patched source."""
    vulkan_fix.apply_fix(vendored)
    assert vulkan_fix.applied_id(vendored) == vulkan_fix.fix_id()
    assert not stale_fix(vendored, vulkan_fix.fix_id())
    target = vendored / vulkan_fix.TARGET
    target.write_text(target.read_text().replace(vulkan_fix.fix_id(), "old-mali-0000000000"))
    assert stale_fix(vendored, vulkan_fix.fix_id()) and not stale_fix(vendored, None)
    with pytest.raises(UserError, match="another version of the old-Mali fix"):
        vulkan_fix.apply_fix(vendored)


def test_a_source_it_does_not_fit_is_left_as_it_was(vendored: Path) -> None:
    target = vendored / vulkan_fix.TARGET
    changed = target.read_text().replace("vk_device ggml_vk_get_device(size_t idx) {", "vk_device other() {")
    target.write_text(changed)
    with pytest.raises(UserError, match="does not apply to this llama.cpp"):
        vulkan_fix.apply_fix(vendored)
    assert target.read_text() == changed


def _edgepilot(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edgepilot", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_print_only_names_the_backend_and_the_fix() -> None:
    done = _edgepilot("build", "--vulkan", "--print-only", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["flags"]["GGML_VULKAN"] == "ON" and data["vulkan"] is True
    assert data["vulkan_fix"] == vulkan_fix.fix_id() and data["built"] is False
    assert "-DGGML_VULKAN=ON" in data["cmake_lines"][0]


def test_the_configure_line_always_says_whether_vulkan_is_on() -> None:
    """cmake's cache keeps GGML_VULKAN=ON from an earlier --vulkan configure: --no-vulkan must say OFF."""
    on = json.loads(_edgepilot("build", "--vulkan", "--print-only", "--json").stdout)
    off = json.loads(_edgepilot("build", "--no-vulkan", "--print-only", "--json").stdout)
    assert "-DGGML_VULKAN=ON" in on["cmake_lines"][0] and "-DGGML_VULKAN=OFF" not in on["cmake_lines"][0]
    assert "-DGGML_VULKAN=OFF" in off["cmake_lines"][0] and "GGML_VULKAN" not in off["flags"]
    assert off["vulkan"] is False and off["vulkan_fix"] is None


def test_cross_target_and_missing_shader_compiler_are_one_line(tmp_path: Path) -> None:
    done = _edgepilot("build", "--vulkan", "--target", "aarch64")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "on the phone" in done.stderr
    # cmake and a compiler, no glslc: refused before unpacking or configuring anything
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("cmake", "c++", "g++"):
        found = shutil.which(name)
        if found:
            (bin_dir / name).symlink_to(found)
    env = {**os.environ, "PATH": str(bin_dir), "EDGEPILOT_TOOLS_DIR": str(tmp_path / "tools")}
    done = _edgepilot("build", "--vulkan", env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "glslc" in done.stderr and "apt-get install glslc" in done.stderr and "--no-vulkan" in done.stderr
    assert not (tmp_path / "tools" / "native" / "src").exists()


def test_a_vulkan_build_stays_one_and_its_tools_say_so(tmp_path: Path) -> None:
    home = tmp_path / "native"
    (home / "bin").mkdir(parents=True)
    tool = home / "bin" / "llama-bench"
    tool.write_text("")
    stamp = home / "build.stamp"
    assert wants_vulkan(None, stamp, "native") is False and vulkan_fix_of(tool) is None
    stamp.write_text(json.dumps({"defines": {"GGML_VULKAN": "ON"}, "vulkan_fix": "old-mali-x"}))
    assert wants_vulkan(None, stamp, "native") is True and wants_vulkan(False, stamp, "native") is False
    assert vulkan_fix_of(tool) == "old-mali-x"
    assert vulkan_fix_of(tmp_path / "elsewhere" / "llama-bench") is None
    stamp.write_bytes(b"\x00" * 200_000)  # garbage, and larger than a stamp is read
    assert vulkan_fix_of(tool) is None and wants_vulkan(None, stamp, "native") is False


def test_the_verdict_with_and_without_the_fix() -> None:
    mali = NamedDevice("Mali-G77 MC9", vendor_id=0x13B5, device_type="INTEGRATED_GPU")
    usable, reasons, _ = judge(mali, (1, 1, 177), (1, 4, 0), True)
    assert usable is False and any("`edgepilot build --vulkan`" in r for r in reasons)
    assert fix_state(mali, (1, 1, 177), (1, 4, 0), True, fixed=False) == "needed"
    mali.vulkan_usable, mali.vulkan_fix = usable, "needed"
    assert final_verdict(mali) == "needs-fix"
    usable, reasons, _ = judge(mali, (1, 1, 177), (1, 1, 0), True, fixed=True)
    assert usable is True and any("usable with edgepilot's fix" in r for r in reasons)
    assert fix_state(mali, (1, 1, 177), (1, 1, 0), True, fixed=True) == "applied"
    # another blocker stays a blocker: the fix is not offered for it
    g715 = NamedDevice("Mali-G715", vendor_id=0x13B5)
    assert fix_state(g715, (1, 1, 0), (1, 4, 0), True, fixed=False) is None
    assert fix_state(mali, (1, 3, 0), (1, 4, 0), True, fixed=False) is None
