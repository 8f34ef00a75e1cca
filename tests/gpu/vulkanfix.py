"""The GPU lane's fixed build: `edgepilot build --vulkan` run inside the root, as a user on the phone
would, from the engine's sdist (copied in from the host's build cache: no download), into a tools folder of
the lane's own (EDGEPILOT_TOOLS_DIR), so the packaged lane's other tests keep Debian's llama.cpp. Built once
per fix and source: a second call finds it up to date."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import sidlane as lane

TOOLS_DIR = "/opt/ep-vulkan-tools"
SDIST_DIR = "/opt/ep-sdist"
# run -ngl needs llama-server (the engine without llama-cpp-python), the GPU choice llama-bench.
TOOLS = "llama-server,llama-completion,llama-bench"
BUILD_TIMEOUT_S = 3600


def tools_env(**extra: str) -> dict[str, str]:
    return {"EDGEPILOT_TOOLS_DIR": TOOLS_DIR, **extra}


def host_sdist() -> Path:
    """The engine's sdist the host's `edgepilot build` fetched (CI builds the host's tools first)."""
    from edgepilot.engine import native_tools
    from edgepilot.toolchain.source import sdist_name

    name = f"{sdist_name(native_tools.PINNED_BINDING)}.tar.gz"
    archive = native_tools.tools_dir("native").parent / "sdist" / name
    if not archive.is_file():
        raise FileNotFoundError(f"{archive}: run `edgepilot build` on the host first")
    return archive


def build_fixed(root: Path) -> dict:
    """`edgepilot build --vulkan --json` in the root; its result (raises with the log's tail on failure)."""
    archive = host_sdist()
    inside = f"{SDIST_DIR}/{archive.name}"
    target = lane.host_path(root, inside)
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(archive, target)
    argv = [f"{lane.VENV}/bin/edgepilot", "build", "--vulkan", "--tools", TOOLS, "--source", inside, "--json"]
    done = lane.run(root, argv, tools_env(), timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"edgepilot build --vulkan failed in the lane:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def tool(name: str) -> str:
    return f"{TOOLS_DIR}/native/bin/{name}"


BINDING_DIR = "/opt/ep-binding"  # llama-cpp-python without its library: it loads the fixed build's libllama
# what llama_cpp imports that the lane lacks (numpy and typing-extensions it has)
BINDING_DEPS = ("diskcache", "jinja2", "markupsafe")


def install_binding(root: Path) -> str:
    """llama-cpp-python, the engine's pinned sdist, pip-installed in the root as the README's compile-once
    set-up does (`CMAKE_ARGS=-DLLAMA_BUILD=OFF`: nothing compiled), into a folder of its own: on PYTHONPATH
    the in-process engine loads the libllama `edgepilot build --vulkan` made. The folder, once per root."""
    if lane.host_path(root, f"{BINDING_DIR}/llama_cpp/__init__.py").is_file():
        return BINDING_DIR
    inside = f"{SDIST_DIR}/{host_sdist().name}"  # build_fixed copied it in
    argv = [
        f"{lane.LANE_VENV}/bin/python",
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--target",
        BINDING_DIR,
        inside,
        *BINDING_DEPS,
    ]
    done = lane.run(root, argv, {"CMAKE_ARGS": "-DLLAMA_BUILD=OFF"}, timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"llama-cpp-python in the lane failed:\n{done.stderr[-3000:]}")
    return BINDING_DIR
