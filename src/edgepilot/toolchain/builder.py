"""`edgepilot build`: llama.cpp's own tools, from the engine's vendored source, for this device (or a phone).

Layout under native_tools.tools_dir(target): src/ (the unpacked llama.cpp), build/ (cmake's tree and logs),
bin/ (the tools and their shared libraries, RPATH $ORIGIN), build.stamp (JSON naming every input). A run
whose stamp matches and whose tools are all there does nothing ("up to date").
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.device.commands import run_output
from edgepilot.device.llama_build import STAMP_LIMIT
from edgepilot.engine import native_tools
from edgepilot.errors import UserError
from edgepilot.file_errors import cannot_write, is_denied, writable_folder
from edgepilot.safe_write import write_text
from edgepilot.toolchain.flags import CROSS_CC, CROSS_CXX, BuildFlags, choose_flags
from edgepilot.toolchain.source import fetch_sdist, is_llama_cpp_dir, unpack_llama_cpp
from edgepilot.toolchain.vulkan_build import (
    add_vulkan,
    check_vulkan_toolchain,
    stale_fix,
    wants_vulkan,
)
from edgepilot.toolchain.vulkan_fix import apply_fix
from edgepilot.untrusted import read_capped

STAMP_VERSION = 1
PERCENT = re.compile(r"^\[\s*(\d+)%\]\s*(.*)$")
Progress = Callable[[int, str], None]  # percent done, what cmake is doing
# Tool name (native_tools.TOOL_NAMES, what users call it) -> the cmake target and binary of this llama.cpp
CMAKE_TARGETS = {"rpc-server": "ggml-rpc-server"}


@dataclass
class BuildResult:
    target: str
    tools: dict[str, str]  # name -> path of the binary
    bin_dir: str
    flags: dict[str, str]
    reasons: list[str]
    cmake_lines: list[str]
    seconds: float
    cached: bool
    built: bool  # False with --print-only
    engine_version: str
    source: str
    stamp: str
    smoke: str | None = None  # the first line of `llama-completion --version` from bin/
    env: dict[str, str] = field(default_factory=dict)  # what running a cross-built tool needs (qemu)
    vulkan: bool = False  # ggml's Vulkan backend built in (--vulkan)
    vulkan_fix: str | None = None  # the old-Mali fix it carries (toolchain/vulkan_fix.py), None: not applied


def cmake_lines(flags: BuildFlags, src: Path, build_dir: Path, jobs: int, tools: list[str]) -> list[str]:
    configure = ["cmake", "-S", str(src), "-B", str(build_dir)] + [
        f"-D{k}={v}" for k, v in flags.defines.items()
    ]
    if not flags.cross and "GGML_VULKAN" not in flags.defines:
        # cmake's cache keeps a -DGGML_VULKAN=ON of an earlier `--vulkan` configure; said on the line only, so
        # the stamp (and the cache of a CPU build) stays what it was
        configure.append("-DGGML_VULKAN=OFF")
    targets = [CMAKE_TARGETS.get(t, t) for t in tools]
    build = ["cmake", "--build", str(build_dir), "--config", "Release", "-j", str(jobs), "--target", *targets]
    return [shlex.join(configure), shlex.join(build)]


def check_toolchain(flags: BuildFlags, termux: bool) -> None:
    """UserError (exit 2) naming the package when cmake or the compiler is missing."""
    if flags.cross:
        missing = [c for c in ("cmake", CROSS_CC, CROSS_CXX) if shutil.which(c) is None]
        if missing:
            raise UserError(
                f"{', '.join(missing)} not found: apt-get install cmake gcc-aarch64-linux-gnu "
                "g++-aarch64-linux-gnu qemu-user-static"
            )
        return
    compiler = any(shutil.which(c) for c in ("c++", "g++", "clang++"))
    if shutil.which("cmake") is None or not compiler:
        what = "cmake" if shutil.which("cmake") is None else "a C++ compiler"
        hint = (
            "pkg install cmake clang" if termux else "apt-get install cmake g++ (or your system's packages)"
        )
        raise UserError(f"{what} not found: {hint}")


def stamp_text(flags: BuildFlags, tools: list[str], version: str, source: str, fix: str | None = None) -> str:
    data = {"v": STAMP_VERSION, "engine": version, "target": flags.target, "defines": flags.defines}
    data |= {"tools": sorted(tools), "source": source}
    if fix is not None:  # only then: a CPU build's stamp (and cache) is what it was before --vulkan existed
        data["vulkan_fix"] = fix
    return json.dumps(data, sort_keys=True)


def build_tools(
    target: str = "native",
    jobs: int | None = None,
    tools: list[str] | None = None,
    print_only: bool = False,
    source: Path | None = None,
    arm_arch: str | None = None,
    root: Path | None = None,
    progress: Progress | None = None,
    vulkan: bool | None = None,
) -> BuildResult:
    """Build (or find up to date) llama.cpp's tools for `target`; `root` probes a device tree instead.
    `vulkan`: True adds ggml's Vulkan backend with the old-Mali fix, False builds without it, None keeps
    what the last build had."""
    from edgepilot.device.probe import probe

    started = time.monotonic()
    names = list(tools or native_tools.TOOL_NAMES)
    unknown = [n for n in names if n not in native_tools.TOOL_NAMES]
    if unknown:
        raise UserError(f"unknown tool {unknown[0]!r}: choose from {', '.join(native_tools.TOOL_NAMES)}")
    if jobs is not None and jobs < 1:
        raise UserError("--jobs must be at least 1")
    home = native_tools.tools_dir(target)
    device = probe(root) if root is not None else (probe() if target == "native" else None)
    cpu = device.cpu if device else None
    android = device.android if device else None
    flags = choose_flags(target, cpu, android, arm_arch)
    vulkan_on = wants_vulkan(vulkan, home / "build.stamp", target)
    own_source = source is None or not source.is_dir()
    fix = add_vulkan(flags, own_source) if vulkan_on else None
    njobs = jobs or max(1, min(os.cpu_count() or 1, 8))
    version = native_tools.engine_version()
    src = home / "src"
    if source is not None and source.is_dir():
        if not is_llama_cpp_dir(source):
            raise UserError(f"{source} is not a llama.cpp source directory (no CMakeLists.txt and ggml/)")
        src = source.resolve()
    build_dir, bin_dir, stamp = home / "build", home / "bin", home / "build.stamp"
    lines = cmake_lines(flags, src, build_dir, njobs, names)
    source_name = f"{source.name}" if source is not None else f"llama-cpp-python=={version} sdist"
    text = stamp_text(flags, names, version, source_name, fix)
    paths = {n: str(bin_dir / n) for n in names}
    env = _cross_env(bin_dir) if flags.cross else {}

    def result(cached: bool, built: bool, smoke: str | None = None) -> BuildResult:
        return BuildResult(
            target, paths, str(bin_dir), dict(flags.defines), flags.reasons, lines,
            round(time.monotonic() - started, 1), cached, built, version, str(src), str(stamp), smoke, env,
            vulkan_on, fix,
        )  # fmt: skip

    if print_only:
        return result(cached=_up_to_date(stamp, text, paths), built=False)
    if _up_to_date(stamp, text, paths):
        return result(cached=True, built=True)
    check_toolchain(flags, termux=bool(android and android.termux))
    if vulkan_on:
        check_vulkan_toolchain(termux=bool(android and android.termux))
    writable_folder(home, "the llama.cpp build", cache_fix())  # before minutes of work
    try:
        if stale_fix(src, fix):
            shutil.rmtree(src)
        if (source is None or not source.is_dir()) and not is_llama_cpp_dir(src):
            archive = source if source is not None else fetch_sdist(version, home.parent / "sdist")
            if not archive.is_file():
                raise UserError(f"--source {archive}: no such sdist archive or llama.cpp directory")
            if progress:
                progress(0, f"unpacking {archive.name}")
            unpack_llama_cpp(archive, version, src)
        if fix is not None:
            apply_fix(src)
        stamp.unlink(missing_ok=True)
        _run(shlex.split(lines[0]), build_dir.with_suffix(".configure.log"), "configure", progress)
        _run(shlex.split(lines[1]), build_dir.with_suffix(".build.log"), "build", progress)
        _install(build_dir / "bin", bin_dir, names)
        smoke = smoke_run(bin_dir, flags, names)
        write_text(stamp, text + "\n", what="build stamp", fix=cache_fix())
    except OSError as exc:  # a file in the build folder of another user, or made read-only meanwhile
        if not is_denied(exc):
            raise
        raise cannot_write(exc.filename or home, exc, cache_fix()) from None
    return result(cached=False, built=True, smoke=smoke)


def cache_fix() -> str:
    """What to do when the build folder (native_tools.tools_dir) is not writable."""
    if os.environ.get("EDGEPILOT_TOOLS_DIR"):
        return "set EDGEPILOT_TOOLS_DIR to a folder you can write"
    return "set XDG_CACHE_HOME (or EDGEPILOT_TOOLS_DIR) to a folder you can write"


def _up_to_date(stamp: Path, text: str, paths: dict[str, str]) -> bool:
    try:  # a regular file within the reader's cap (a FIFO there never blocks the build)
        current = read_capped(stamp, STAMP_LIMIT).decode("utf-8", errors="replace").strip()
    except OSError:
        return False
    return current == text and all(os.access(p, os.X_OK) for p in paths.values())


def _run(cmd: list[str], log: Path, step: str, progress: Progress | None) -> None:
    """Run a cmake step, its output into `log`, [ NN%] lines to `progress`; UserError on failure."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        try:
            proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
            )
        except OSError as exc:
            raise UserError(f"cmake {step} could not start: {exc}") from None
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                out.write(line)
                match = PERCENT.match(line)
                if progress and match:
                    progress(int(match.group(1)), match.group(2).strip())
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        rc = proc.wait()
    if rc != 0:
        tail = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if "rror" in ln][-1:]
        detail = f": {tail[0][:200]}" if tail else ""
        raise UserError(f"cmake {step} failed (exit {rc}){detail}; full log: {log}")


def _install(built: Path, bin_dir: Path, names: list[str]) -> None:
    """The tools and every shared library they load, into bin/ (symlinks kept; RPATH is $ORIGIN)."""
    bin_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".bin-", dir=bin_dir.parent))  # fresh: nothing there to follow
    try:
        _fill_bin(built, tmp, names)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    tmp.chmod(0o755)
    shutil.rmtree(bin_dir, ignore_errors=True)
    os.replace(tmp, bin_dir)


def _fill_bin(built: Path, tmp: Path, names: list[str]) -> None:
    for name in names:
        made = built / CMAKE_TARGETS.get(name, name)
        if not made.is_file():
            raise UserError(f"the build made no {made.name} (see {built.parent}.build.log)")
        shutil.copy2(made, tmp / name)
        if made.name != name:  # llama.cpp's own name too (its docs use both)
            (tmp / made.name).symlink_to(name)
    for lib in sorted(built.glob("lib*.so*")):
        if lib.is_symlink():
            (tmp / lib.name).symlink_to(os.readlink(lib))
        else:
            shutil.copy2(lib, tmp / lib.name)


def _cross_env(bin_dir: Path) -> dict[str, str]:
    return {"QEMU_LD_PREFIX": "/usr/aarch64-linux-gnu", "QEMU_CPU": "max", "LD_LIBRARY_PATH": str(bin_dir)}


def tool_command(path: Path, flags_cross: bool) -> list[str]:
    """How to start a built tool: directly, or under qemu-aarch64-static for a cross build."""
    return ["qemu-aarch64-static", str(path)] if flags_cross else [str(path)]


def smoke_run(bin_dir: Path, flags: BuildFlags, names: list[str]) -> str:
    """Run the first built tool's --version from bin/ (no LD_LIBRARY_PATH for a native build: RPATH works)."""
    tool = "llama-completion" if "llama-completion" in names else names[0]
    env = dict(os.environ)
    if flags.cross:
        if shutil.which("qemu-aarch64-static") is None:
            return "not run: qemu-aarch64-static missing (apt-get install qemu-user-static)"
        env |= _cross_env(bin_dir)
    else:
        env.pop("LD_LIBRARY_PATH", None)
    cmd = tool_command(bin_dir / tool, flags.cross) + ["--version"]
    done = run_output(cmd, 120, 1 << 20, env=env)  # bounded: output, time, and what it leaves running
    if done.reason is not None:
        raise UserError(f"the built {tool} does not run: {done.reason}")
    out = (done.stdout + done.stderr).strip().splitlines()
    if done.returncode != 0:
        raise UserError(f"the built {tool} does not run (exit {done.returncode}): {(out or [''])[-1][:200]}")
    return next((ln for ln in out if ln.startswith("version")), out[0] if out else "")
