"""Where llama.cpp's own programs are: built by `edgepilot build`, or installed by a package manager.

`edgepilot build` makes them from the llama.cpp vendored in the llama-cpp-python sdist, so a built tool and
the in-process engine run the same commit (RPC client and server must match). One directory per target and
engine version: $EDGEPILOT_TOOLS_DIR/<target> when set, else
${XDG_CACHE_HOME:-~/.cache}/edgepilot/tools/<target>-<version>, binaries and their shared libraries in `bin/`.

For this machine (target "native") a tool is looked up in that directory first, then on PATH: Termux's
`pkg install llama-cpp`, Debian's `llama.cpp-tools` and Homebrew's `llama.cpp` put them there, in another
version than the pinned one (`tool_version` reads which).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from edgepilot.errors import UserError
from edgepilot.program_path import which

TOOL_NAMES = (
    "llama-server",
    "llama-bench",
    "llama-completion",
    "rpc-server",
    "llama-quantize",
    "llama-perplexity",  # compare's KL-divergence mode through the tools
)
# Packaged elsewhere than the rest (Termux's llama-cpp has it not; Debian ships it in llama.cpp-tools-extra).
EXTRA_PACKAGE = ("llama-perplexity",)
TARGETS = ("native", "aarch64")
# The llama-cpp-python release whose vendored llama.cpp the memory plan is calibrated on and `build` compiles;
# pyproject.toml pins the same.
PINNED_BINDING = "0.3.36"
VERSION_SECONDS = 20
OUTPUT_LIMIT = 1 << 20  # --help of llama-server: ~30 KiB
# An installed GPU backend (ggml-vulkan) with no device to create: every CPU run, and --help/--version
HIDE_VULKAN_DEVICES = {"GGML_VK_VISIBLE_DEVICES": ""}
# What keeps every GPU driver out of a llama.cpp process (measured with Debian's vulkan-loader 1.4.363 and
# llama.cpp 0.7.0: with the first three the ICD library is never loaded and ggml registers no Vulkan backend).
# VK_ICD_FILENAMES is the name loaders before 1.3.207 read. GGML_VK_VISIBLE_DEVICES="" alone still loads the
# driver (instance and enumeration) but no device is created: kept for loaders that ignore the others
# (Android's system loader may).
NO_DRIVER_MANIFEST = "/nonexistent/edgepilot-no-vulkan-driver.json"
KEEP_OUT_ENV = {
    "VK_DRIVER_FILES": NO_DRIVER_MANIFEST,
    "VK_ICD_FILENAMES": NO_DRIVER_MANIFEST,
    "VK_LOADER_DRIVERS_DISABLE": "*",
    "GGML_VK_VISIBLE_DEVICES": "",
}

# Which package provides a program, per packager (Termux's llama-cpp has no rpc-server and no perplexity).
PACKAGES = {
    "termux": "pkg install llama-cpp",
    "debian": "apt install llama.cpp-tools",
    "homebrew": "brew install llama.cpp",
}
NOT_IN_TERMUX = {"rpc-server", "llama-perplexity"}


class ToolMissing(UserError):
    """A llama.cpp program that is neither built here nor on PATH."""


def engine_version() -> str:
    """The llama-cpp-python release whose llama.cpp `build` compiles (the installed one, else the pin)."""
    return installed_binding() or PINNED_BINDING


def installed_binding() -> str | None:
    """The installed llama-cpp-python's version (None: not installed), read from the METADATA of its
    dist-info beside the package: probe, fit and --version ask, and importing importlib.metadata costs them
    more than the rest of their engine lookup."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    site = Path(next(iter(spec.submodule_search_locations))).parent
    infos = list(site.glob("llama_cpp_python-*.dist-info"))
    if len(infos) == 1:
        try:
            with (infos[0] / "METADATA").open(encoding="utf-8", errors="replace") as f:
                for line in f:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():
                        break  # the headers ended
        except OSError:
            pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        return None


def tools_dir(target: str = "native") -> Path:
    if target not in TARGETS:
        raise UserError(f"unknown build target {target!r}: choose one of {', '.join(TARGETS)}")
    explicit = os.environ.get("EDGEPILOT_TOOLS_DIR")
    if explicit:
        return Path(explicit).expanduser() / target
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "edgepilot" / "tools" / f"{target}-{engine_version()}"


def built_tool(name: str, target: str = "native") -> Path | None:
    path = tools_dir(target) / "bin" / name
    return path if path.is_file() and os.access(path, os.X_OK) else None


# Other names and places packagers use: Debian ships rpc-server as ggml-rpc-server, off PATH in libexec.
ALIASES = {"rpc-server": ("ggml-rpc-server",)}
LIBEXEC_GLOB = "/usr/libexec/*/llama/bin"


def path_tool(name: str) -> Path | None:
    for candidate in (name, *ALIASES.get(name, ())):
        found = which(candidate)
        if found:
            return Path(found)
        for directory in sorted(Path("/").glob(LIBEXEC_GLOB.lstrip("/"))):
            path = directory / candidate
            if path.is_file() and os.access(path, os.X_OK):
                return path
    return None


def where_to_get(name: str) -> str:
    """Which package or build provides `name`, in one clause."""
    if name in EXTRA_PACKAGE:
        return (
            f"apt install llama.cpp-tools-extra, {PACKAGES['homebrew']} or `edgepilot build` (Termux's "
            "llama-cpp has none)"
        )
    if name in NOT_IN_TERMUX:
        return (
            f"run `edgepilot build` (Termux's llama-cpp package has no {name}; Debian's is ggml-rpc-server "
            "in llama.cpp-tools-extra)"
        )
    return (
        f"{PACKAGES['termux']} (Termux), {PACKAGES['debian']}, {PACKAGES['homebrew']}, or `edgepilot build`"
    )


def packager() -> str | None:
    """This system's package manager among PACKAGES (None: none we know to carry llama.cpp)."""
    if os.environ.get("TERMUX_VERSION") or "com.termux" in os.environ.get("PREFIX", ""):
        return "termux"
    if sys.platform == "darwin":
        return "homebrew"
    if os.path.exists("/etc/debian_version"):
        return "debian"
    return None


def install_hint(name: str) -> str | None:
    """How to get llama.cpp's program `name` here, in one clause: this system's package, and `edgepilot build`
    for what it builds (it makes llama-completion, not llama-cli). None: not a llama.cpp program."""
    built = name in TOOL_NAMES
    if not built and name != "llama-cli":
        return None
    how = packager()
    package = PACKAGES[how] if how and not (how == "termux" and name in NOT_IN_TERMUX) else None
    if package and how == "debian" and name in NOT_IN_TERMUX:
        package += "-extra"  # Debian's rpc-server (ggml-rpc-server) and llama-perplexity
    packaged = f"`{package}` installs it, or " if package else ""
    if built:
        return f"{packaged}`edgepilot build` makes it"
    try:  # already built: name it, not the build
        built_one = find_tool("llama-completion")
        return f"{packaged}use llama-completion (the same one-shot completion): {built_one}"
    except ToolMissing:
        return f"{packaged}`edgepilot build` makes llama-completion (the same one-shot completion)"


def find_tool(name: str, target: str = "native", built_only: bool = False) -> Path:
    """The program's path: the one `edgepilot build` made, else (native target) the one on PATH.
    ToolMissing (one line, exit 2) says which package or build provides it."""
    path = built_tool(name, target)
    if path is not None:
        return path
    if target != "native" or built_only:
        flag = "" if target == "native" else f" --target {target}"
        raise ToolMissing(f"llama.cpp's {name} is not built here: run `edgepilot build{flag}` first")
    path = path_tool(name)
    if path is None:
        raise ToolMissing(f"llama.cpp's {name} is not installed: {where_to_get(name)}")
    return path


@dataclass(frozen=True)
class ToolVersion:
    """What `TOOL --version` says: `version: 0.7.0 (build 11669, commit Debian)` or `version: 1 (abc123)`."""

    text: str  # the version line as printed, without "version: "
    number: str  # "0.7.0", "6580", "1"
    build: int | None  # llama.cpp's build number where it says one
    commit: str | None
    source: str  # "built" (edgepilot build, the pinned commit) | "path" (a packaged llama.cpp)

    @property
    def key(self) -> str:
        """A file-name-safe identity of this llama.cpp, for per-version caches."""
        raw = f"{self.source}-{self.number}-{self.build or ''}-{self.commit or ''}"
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", raw)[:120]


VERSION_LINE = re.compile(r"^version:\s*(?P<number>\S+)\s*(?:\((?P<paren>[^)]*)\))?", re.M)


def parse_version(output: str, source: str) -> ToolVersion | None:
    m = VERSION_LINE.search(output)
    if not m:
        return None
    paren = m.group("paren") or ""
    build = re.search(r"build\s+(\d+)", paren)
    commit = re.search(r"commit\s+(\S+)", paren)
    bare = paren.strip() if paren and " " not in paren.strip() else None  # "(abc123)": a commit alone
    text = m.group(0).split(":", 1)[1].strip()
    return ToolVersion(
        text=text,
        number=m.group("number"),
        build=int(build.group(1)) if build else None,
        commit=commit.group(1) if commit else bare,
        source=source,
    )


def tool_source(path: Path) -> str:
    try:
        inside = path.resolve().is_relative_to(tools_dir("native").resolve())
    except OSError:
        inside = False
    return "built" if inside else "path"


@lru_cache(maxsize=32)
def _output(path: str, mtime_ns: int, flag: str) -> str | None:
    """Read bounded (device/commands.run_output): a `--version` that never stops printing, or a program whose
    child keeps the pipe open, costs at most OUTPUT_LIMIT bytes and VERSION_SECONDS (None then)."""
    from edgepilot.device.commands import run_output

    # --help loads the backends too: no GPU driver for a question about flags (a broken one crashes)
    env = {**os.environ, "GGML_NO_BACKTRACE": "1", **HIDE_VULKAN_DEVICES, **KEEP_OUT_ENV}
    done = run_output([path, flag], VERSION_SECONDS, OUTPUT_LIMIT, env=env)
    if done.reason is not None:
        return None
    return done.stdout + "\n" + done.stderr


def tool_output(tool: Path | str, flag: str) -> str | None:
    """What `TOOL FLAG` prints (stdout and stderr; `--version`, `--help`), cached per binary; None when it
    would not run."""
    try:
        mtime = Path(tool).stat().st_mtime_ns
    except OSError:
        return None
    return _output(str(tool), mtime, flag)


def tool_version(path: Path) -> ToolVersion | None:
    """The llama.cpp version a program was built from (None: it would not say)."""
    text = tool_output(path, "--version")
    return None if text is None else parse_version(text, tool_source(Path(path)))
