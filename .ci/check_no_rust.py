#!/usr/bin/env python3
"""CI: the default install (no extras) must build on Termux, whose pip gets no wheels and has no Rust.

Resolves the project's dependency closure with pip (`install --dry-run --ignore-installed --report`: nothing
is built or installed; an sdist's metadata is prepared without compiling, and pip reuses a cached wheel's)
and fails when it holds a package that needs Rust to build, or a compiled package nobody has checked yet.

    python .ci/check_no_rust.py [--report REPORT.json] [--save OUT.json] [PROJECT_DIR]

--report checks a report pip already wrote instead of resolving (the tests use it); --save writes the
resolved closure as tests/install/report-default.json records it (names, versions, file names; no local
paths). Exit 0: clean; 1: a package to remove or to review; 2: pip could not resolve.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pip_check  # noqa: E402  (.ci/ is not a package)
from pip_check import normalize  # noqa: E402

# Built with Rust (PyO3/maturin or setuptools-rust): Termux's pip cannot build them (pydantic-core #855,
# #1474; termux-packages #19956).
RUST_BUILT = {
    "bcrypt",
    "cryptography",
    "hf-xet",
    "jiter",
    "maturin",
    "nh3",
    "orjson",
    "ormsgpack",
    "polars",
    "pydantic-core",
    "rpds-py",
    "ruff",
    "safetensors",
    "setuptools-rust",
    "tiktoken",
    "tokenizers",
    "uv",
    "watchfiles",
}
# Compiled packages that build from source on Termux with its clang (or come as Termux packages): C or C++.
CHECKED_COMPILED = {
    "llama-cpp-python",  # C++ (llama.cpp) with cmake: the one long build
    "markupsafe",  # C speed-ups (Jinja2's dependency), optional in its build
    "numpy",  # C; Termux has python-numpy
    "psutil",  # C; Termux has python-psutil
}


def is_compiled(url: str) -> bool:
    """A wheel with a Python ABI tag (not `none`), or an sdist: on Termux both mean a build on the phone."""
    file = url.rsplit("/", 1)[-1]
    if file.endswith(".whl"):
        return file[:-4].split("-")[-2] != "none"
    return file.endswith((".tar.gz", ".zip", ".tar.bz2"))


def problems(report: dict) -> tuple[list[str], list[str]]:
    """(every package of the closure, what is wrong with it)."""
    names, wrong = [], []
    for item in report.get("install", []):
        name = normalize(item["metadata"]["name"])
        info = item.get("download_info", {})
        if "dir_info" in info:  # the project itself
            continue
        names.append(name)
        if name in RUST_BUILT:
            wrong.append(f"{name}: needs Rust to build, which Termux's pip cannot do")
        elif name not in CHECKED_COMPILED and is_compiled(info.get("url", "")):
            wrong.append(
                f"{name}: compiled ({info.get('url', '').rsplit('/', 1)[-1]}); Termux builds it from source: "
                "check it needs no Rust, then add it to CHECKED_COMPILED"
            )
    return names, wrong


def resolve(project: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        done = subprocess.run([*cmd, "--report", str(out), str(project)], capture_output=True, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            sys.exit(2)
        return json.loads(out.read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    return pip_check.main(
        argv,
        name="check_no_rust",
        doc=__doc__,
        resolve=resolve,
        check=problems,
        trim=pip_check.trimmed,
        passed=lambda names: f"{len(names)} packages in the default install, none needs Rust",
    )


if __name__ == "__main__":
    sys.exit(main())
