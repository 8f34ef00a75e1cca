"""Unpacking the sdist's vendor/llama.cpp: only that subtree, nothing that escapes, bounded."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from edgepilot.errors import UserError
from edgepilot.toolchain import source

VERSION = "9.9.9"
TOP = f"llama_cpp_python-{VERSION}"
VENDOR = f"{TOP}/vendor/llama.cpp"


def make_sdist(path: Path, extra: list[tarfile.TarInfo] = (), files: dict[str, bytes] | None = None) -> Path:
    files = files if files is not None else {
        f"{TOP}/pyproject.toml": b"[project]\n",
        f"{VENDOR}/CMakeLists.txt": b"project(llama)\n",
        f"{VENDOR}/ggml/CMakeLists.txt": b"project(ggml)\n",
        f"{VENDOR}/src/llama.cpp": b"int x;\n",
    }  # fmt: skip
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return path


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, size
    return info


def test_only_vendor_llama_cpp_is_unpacked(tmp_path):
    archive = make_sdist(tmp_path / "s.tar.gz")
    dest = source.unpack_llama_cpp(archive, VERSION, tmp_path / "src")
    got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert got == ["CMakeLists.txt", "ggml/CMakeLists.txt", "src/llama.cpp"]
    assert source.is_llama_cpp_dir(dest)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.tar.gz", "src"]  # no temporary left


def test_a_python_without_tarfile_filters_unpacks_the_same(tmp_path, monkeypatch):
    """Debian 12's Python 3.11.2 has neither TarInfo.replace nor extraction filters (3.11.4+): the same tree,
    with plain permissions (a setuid bit in the archive does not survive)."""
    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    monkeypatch.delattr(tarfile.TarInfo, "replace", raising=False)
    setuid = member(f"{VENDOR}/tool.sh", size=3)
    setuid.mode = 0o4777
    archive = make_sdist(tmp_path / "s.tar.gz", [setuid])
    dest = source.unpack_llama_cpp(archive, VERSION, tmp_path / "src")
    got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert got == ["CMakeLists.txt", "ggml/CMakeLists.txt", "src/llama.cpp", "tool.sh"]
    assert (dest / "tool.sh").stat().st_mode & 0o7777 == 0o755


@pytest.mark.parametrize(
    "bad, why",
    [
        (member(f"{VENDOR}/../../../escape.txt", size=3), "points outside"),
        (member("/etc/evil", size=3), "points outside"),
        (member(f"{VENDOR}/link", tarfile.SYMTYPE, "/etc/passwd"), "is a link"),
        (member(f"{VENDOR}/rel-link", tarfile.SYMTYPE, "../../.."), "is a link"),
        (member(f"{VENDOR}/hard", tarfile.LNKTYPE, f"{TOP}/pyproject.toml"), "is a link"),
        (member(f"{VENDOR}/fifo", tarfile.FIFOTYPE), "not a regular file"),
    ],
)
def test_hostile_members_are_refused(tmp_path, bad, why):
    archive = make_sdist(tmp_path / "s.tar.gz", [bad])
    with pytest.raises(UserError, match=why):
        source.unpack_llama_cpp(archive, VERSION, tmp_path / "out" / "src")
    assert list((tmp_path / "out").iterdir()) == []  # nothing unpacked, no temporary left
    assert not (tmp_path / "escape.txt").exists()


def test_member_count_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(source, "MAX_MEMBERS", 3)
    archive = make_sdist(tmp_path / "s.tar.gz", [member(f"{VENDOR}/f{i}", size=1) for i in range(5)])
    with pytest.raises(UserError, match="over 3 files"):
        source.unpack_llama_cpp(archive, VERSION, tmp_path / "src")


def test_not_an_sdist(tmp_path):
    archive = make_sdist(tmp_path / "s.tar.gz", files={f"{TOP}/README": b"hi"})
    with pytest.raises(UserError, match="not a llama-cpp-python sdist"):
        source.unpack_llama_cpp(archive, VERSION, tmp_path / "src")
    (tmp_path / "junk.tar.gz").write_bytes(b"\x1f\x8b not gzip at all")
    with pytest.raises(UserError, match="cannot unpack junk.tar.gz"):
        source.unpack_llama_cpp(tmp_path / "junk.tar.gz", VERSION, tmp_path / "src")


def test_cli_refuses_a_crafted_sdist_in_one_line(cli_app, tmp_path, monkeypatch):
    """Through `edgepilot build --source`: exit 2, one line, nothing written outside the tools directory."""
    from edgepilot.engine.native_tools import engine_version

    monkeypatch.setenv("EDGEPILOT_TOOLS_DIR", str(tmp_path / "tools"))
    top = f"llama_cpp_python-{engine_version()}"
    evil = tarfile.TarInfo(f"{top}/vendor/llama.cpp/../../../../pwned")
    evil.size = 1
    archive = make_sdist(tmp_path / "evil.tar.gz", [evil])
    result = CliRunner().invoke(cli_app, ["build", "--source", str(archive)])
    assert result.exit_code == 2
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("edgepilot: error:")]
    assert len(errors) == 1 and "points outside" in errors[0] and "Traceback" not in result.stderr
    assert not any(p.name == "pwned" for p in tmp_path.rglob("*"))
