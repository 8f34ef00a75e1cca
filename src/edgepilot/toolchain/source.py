"""The engine's llama.cpp source: vendor/llama.cpp of the llama-cpp-python sdist, unpacked safely.

The sdist comes from `pip download --no-binary :all: --no-deps` (pip's cache makes a second fetch free) or a
path the user gives (an sdist archive or an unpacked llama.cpp directory). Unpacking takes only the
members under <sdist>/vendor/llama.cpp/, refuses links, absolute paths and `..`, bounds member count and
total size, and extracts with tarfile's 'data' filter on top: nothing can land outside the source directory.
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from edgepilot.device.commands import run_output
from edgepilot.errors import UserError

MAX_MEMBERS = 20000  # the 0.3.36 sdist has ~3,700 members under vendor/llama.cpp
MAX_BYTES = 1 << 30  # ~210 MB there
PIP_TIMEOUT = 600
PIP_OUTPUT = 1 << 20


def sdist_name(version: str) -> str:
    return f"llama_cpp_python-{version}"


def fetch_sdist(version: str, dest: Path) -> Path:
    """The engine's sdist in `dest` (downloaded through pip, which reuses its cache)."""
    archive = dest / f"{sdist_name(version)}.tar.gz"
    if archive.is_file():
        return archive
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
    cmd += [f"llama-cpp-python=={version}", "-d", str(dest)]
    done = run_output(cmd, PIP_TIMEOUT, PIP_OUTPUT)
    if done.reason is not None:
        raise UserError(f"could not download the llama-cpp-python {version} sdist: {done.reason}")
    if done.returncode != 0 or not archive.is_file():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(
            f"could not download the llama-cpp-python {version} sdist ({last}); "
            "give one with --source llama_cpp_python-VERSION.tar.gz"
        )
    return archive


def vendor_members(tar: tarfile.TarFile, prefix: str) -> list[tuple[tarfile.TarInfo, str]]:
    """The members under prefix/ with their path relative to it; UserError on anything unsafe or too big."""
    picked: list[tuple[tarfile.TarInfo, str]] = []
    total = 0
    seen = 0
    for member in tar:
        seen += 1
        if seen > MAX_MEMBERS * 4:
            raise UserError(f"refusing the sdist: more than {MAX_MEMBERS * 4} members")
        path = PurePosixPath(member.name)
        if path.is_absolute() or ".." in path.parts:
            raise UserError(f"refusing the sdist: member {member.name!r} points outside the archive")
        if path.parts[: len(PurePosixPath(prefix).parts)] != PurePosixPath(prefix).parts:
            continue
        if member.issym() or member.islnk():
            raise UserError(f"refusing the sdist: {member.name!r} is a link")
        if not (member.isfile() or member.isdir()):
            raise UserError(f"refusing the sdist: {member.name!r} is not a regular file or directory")
        total += member.size
        if len(picked) >= MAX_MEMBERS or total > MAX_BYTES:
            raise UserError(f"refusing the sdist: vendor/llama.cpp is over {MAX_MEMBERS} files or 1 GiB")
        rel = str(path.relative_to(prefix))
        if rel != ".":
            picked.append((member, rel))
    return picked


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, rel: str, dest: Path) -> None:
    """One checked member (a file or a folder) at `rel` under dest, with tarfile's 'data' filter where this
    Python has it (3.11.4+, 3.10.12+); before that, the same effect by hand: plain permissions, our owner."""
    member = copy.copy(member)
    member.name = rel
    if hasattr(tarfile, "data_filter"):
        tar.extract(member, dest, filter="data")
        return
    member.mode &= 0o755
    member.uid, member.gid, member.uname, member.gname = os.getuid(), os.getgid(), "", ""
    tar.extract(member, dest, set_attrs=member.isfile())


def unpack_llama_cpp(archive: Path, version: str, dest: Path) -> Path:
    """Unpack <sdist>/vendor/llama.cpp into `dest` (replaced atomically: never half unpacked)."""
    prefix = f"{sdist_name(version)}/vendor/llama.cpp"
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest.parent))
    try:
        try:
            with tarfile.open(archive, "r:*") as tar:
                members = vendor_members(tar, prefix)
                if not any(rel == "CMakeLists.txt" for _, rel in members):
                    raise UserError(
                        f"{archive.name} has no {prefix}/CMakeLists.txt: not a llama-cpp-python sdist"
                    )
                for member, rel in members:
                    _extract(tar, member, rel, tmp)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise UserError(f"cannot unpack {archive.name}: {exc}") from None
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def is_llama_cpp_dir(path: Path) -> bool:
    return (path / "CMakeLists.txt").is_file() and (path / "ggml" / "CMakeLists.txt").is_file()
