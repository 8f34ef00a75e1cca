"""The lane is `edgepilot build --target aarch64`'s tools plus CPU libraries built against them (no compiling
here: fake trees). Ready means the tools are up to date and cpu.stamp names the tools' own build.stamp, so a
rebuilt llama.cpp makes the lane rebuild its CPU libraries instead of mixing two builds."""

from __future__ import annotations

from pathlib import Path

import pytest

import aarch64_lane
from edgepilot.engine import native_tools
from edgepilot.toolchain.builder import stamp_text
from edgepilot.toolchain.flags import choose_flags


@pytest.fixture
def fake_lane(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """(lane dir, tools bin) with everything a ready lane has, but nothing that runs."""
    monkeypatch.setenv("EDGEPILOT_TOOLS_DIR", str(tmp_path / "tools"))
    monkeypatch.setenv(aarch64_lane.LANE_ENV, str(tmp_path / "lane"))
    monkeypatch.setattr(aarch64_lane, "QEMU", "sh")  # any program on PATH
    monkeypatch.setattr(aarch64_lane, "SYSROOT", tmp_path)  # has a lib/ below
    (tmp_path / "lib").mkdir()
    home = native_tools.tools_dir("aarch64")
    (home / "bin").mkdir(parents=True)
    for name in native_tools.TOOL_NAMES:
        (home / "bin" / name).write_text("")
        (home / "bin" / name).chmod(0o755)
    version = native_tools.engine_version()
    flags = choose_flags("aarch64", None, None, aarch64_lane.ARM_ARCH)
    source = f"llama-cpp-python=={version} sdist"
    tools_stamp = stamp_text(flags, list(native_tools.TOOL_NAMES), version, source)
    (home / "build.stamp").write_text(tools_stamp + "\n")
    lane = aarch64_lane.lane_dir()
    for cpu in ("dotprod", "neon"):
        (lane / f"cpu-{cpu}" / "bin").mkdir(parents=True)
        (lane / f"cpu-{cpu}" / "bin" / "libggml-cpu.so").write_text("")
    (lane / "cpu.stamp").write_text(f"{aarch64_lane.CPU_STAMP}\n{tools_stamp}\n")
    return lane, home / "bin"


def test_a_lane_is_the_aarch64_tools_plus_its_cpu_libraries(fake_lane):
    lane_root, tools_bin = fake_lane
    assert aarch64_lane.lane_problem() is None
    lane = aarch64_lane.Lane(aarch64_lane.lane_dir())
    assert lane.tool("llama-completion") == tools_bin / "llama-completion"
    assert lane.env(cpu="i8mm")["LD_LIBRARY_PATH"] == str(tools_bin)
    neon = lane_root / "cpu-neon" / "bin"
    assert lane.env("cortex-a53", "neon")["LD_LIBRARY_PATH"] == f"{neon}:{tools_bin}"


def test_cpu_libraries_built_against_other_tools_are_not_a_lane(fake_lane):
    lane_root, tools_bin = fake_lane
    stamp = tools_bin.parent / "build.stamp"
    stamp.write_text(stamp.read_text().replace('"tools"', '"tools_"'))  # the tools rebuilt differently
    assert "not up to date" in aarch64_lane.lane_problem()
    stamp.write_text(stamp.read_text().replace('"tools_"', '"tools"'))
    (lane_root / "cpu.stamp").write_text(f"{aarch64_lane.CPU_STAMP}\n{{}}\n")  # built against another build
    assert "no CPU libraries for these aarch64 tools" in aarch64_lane.lane_problem()


def test_missing_tools_or_cpu_library_is_named(fake_lane):
    lane_root, tools_bin = fake_lane
    (lane_root / "cpu-neon" / "bin" / "libggml-cpu.so").unlink()
    assert "neon CPU library is missing" in aarch64_lane.lane_problem()
    (tools_bin / "llama-bench").unlink()
    assert "not up to date" in aarch64_lane.lane_problem()
