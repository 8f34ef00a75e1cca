"""safe_write.py, the one way edgepilot writes a file: inputs are never targets, device nodes and directories
are never replaced, temporary and partial names never follow a symlink, and every failure is one line."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from edgepilot.errors import UserError
from edgepilot.safe_write import (
    atomic_path,
    atomic_write,
    check_target,
    open_partial,
    write_bytes,
    write_text,
)


@pytest.fixture
def victim(tmp_path) -> Path:
    """A file elsewhere that a followed symlink would write or truncate."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    path = folder / "precious"
    path.write_bytes(b"precious bytes")
    return path


@pytest.fixture
def char_device(tmp_path) -> Path:
    """A character device node of our own (the null device's numbers), or /dev/null where mknod is denied."""
    path = tmp_path / "null"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except OSError:
        return Path("/dev/null")
    return path


def test_a_new_file_and_a_replaced_one(tmp_path):
    target = tmp_path / "out.json"
    write_text(target, "one")
    write_text(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary file left behind


def test_a_symlink_at_the_temporary_name_is_never_followed(tmp_path, victim, monkeypatch):
    """mkstemp's next candidate name is taken by a symlink to another file: O_EXCL skips it."""
    target = tmp_path / "out.bin"
    names = iter(["taken", "free"])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: names)
    (tmp_path / ".out.bin.taken.tmp").symlink_to(victim)
    write_bytes(target, b"new bytes")
    assert victim.read_bytes() == b"precious bytes"
    assert target.read_bytes() == b"new bytes" and not target.is_symlink()
    assert (tmp_path / ".out.bin.taken.tmp").is_symlink()  # left as it was, not written through


def test_stale_links_at_the_old_fixed_names_are_left_alone(tmp_path, victim):
    """The names edgepilot used to write through (NAME.part, NAME.tmp, .NAME.PID.tmp) as symlinks."""
    target = tmp_path / "s.sess"
    stale = [f"{target.name}.part", f"{target.name}.partial", "s.tmp", f".{target.name}.{os.getpid()}.tmp"]
    for name in stale:
        (tmp_path / name).symlink_to(victim)
    with atomic_path(target, what="session") as part:
        assert part.parent == tmp_path and part.name not in stale
        part.write_bytes(b"written by name")
    write_bytes(tmp_path / "s", b"x")
    assert victim.read_bytes() == b"precious bytes"
    assert target.read_bytes() == b"written by name"


def test_a_failed_write_leaves_the_target_and_no_temporary(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_write(target) as f:
        f.write(b"half")
        raise RuntimeError("the writer failed")
    with pytest.raises(UserError), atomic_path(target) as part:
        part.write_bytes(b"half")
        raise UserError("the quantizer failed")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_an_input_is_never_a_target_by_hard_link_or_symlink(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF model bytes")
    hard = tmp_path / "hard.gguf"
    os.link(model, hard)
    soft = tmp_path / "soft.gguf"
    soft.symlink_to(model)
    for target in (model, hard, soft, tmp_path / "." / "model.gguf"):
        with pytest.raises(UserError, match="is an input file itself"):
            write_bytes(target, b"session", inputs=[model], what="session file")
        with pytest.raises(UserError, match="is an input file itself"), atomic_path(target, inputs=[soft]):
            pass
    assert model.read_bytes() == b"GGUF model bytes" and soft.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.gguf", "model.gguf", "soft.gguf"]


def test_a_device_node_fifo_or_directory_is_not_replaced(tmp_path, char_device):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="character device"):
        write_bytes(char_device, b"x")
    with pytest.raises(UserError, match="FIFO"):
        write_bytes(fifo, b"x")
    with pytest.raises(UserError, match="is a directory"):
        write_bytes(tmp_path, b"x")
    assert stat.S_ISCHR(os.stat(char_device).st_mode) and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_nul_in_the_path_is_one_line(tmp_path):
    with pytest.raises(UserError, match="NUL"):
        write_bytes(f"{tmp_path}/a\0b", b"x")
    with pytest.raises(UserError, match="NUL"):
        check_target("a\0b")


def _write_into(folder: str) -> str:
    try:
        write_text(Path(folder) / "out.txt", "x", what="session file")
    except UserError as exc:
        return str(exc)
    return "written"


def test_a_read_only_folder_is_one_line(open_tmp, unprivileged):
    folder = open_tmp / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    message = unprivileged(_write_into, str(folder))
    assert "not writable" in message and "\n" not in message
    assert not list(folder.iterdir())


def test_a_symlinked_partial_is_refused_and_not_followed(tmp_path, victim):
    part = tmp_path / "model.gguf.part"
    part.symlink_to(victim)
    with pytest.raises(UserError, match="symbolic link"):
        open_partial(part)
    assert victim.read_bytes() == b"precious bytes"


def test_a_fifo_partial_is_refused_without_blocking(tmp_path):
    """In a child with a deadline: before O_NONBLOCK, opening a FIFO waited for a writer forever."""
    part = tmp_path / "model.gguf.part"
    os.mkfifo(part)
    code = (
        "import sys\nfrom edgepilot.safe_write import open_partial\nfrom edgepilot.errors import UserError\n"
        "try:\n    open_partial(sys.argv[1])\nexcept UserError as exc:\n    print(exc)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(part)], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("open_partial blocked on a FIFO")
    assert "FIFO" in done.stdout and done.returncode == 0, done
    assert stat.S_ISFIFO(os.lstat(part).st_mode)


def test_a_partial_keeps_its_bytes_for_resuming(tmp_path):
    part = tmp_path / "model.gguf.part"
    part.write_bytes(b"first half")
    with open_partial(part) as f:
        assert f.read() == b"first half"
        f.write(b", second half")
    assert part.read_bytes() == b"first half, second half"
