"""Tolerant reads, snapshot save -> replay identity (this machine), archive safety, probe speed."""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path

import pytest

from edgepilot.device import commands, fs
from edgepilot.device.probe import probe
from edgepilot.device.snapshot import save
from edgepilot.errors import UserError
from edgepilot.jsonable import dumps


def test_reads_never_raise_and_keep_the_device_path(tmp_path):
    assert fs.read_text(tmp_path, "proc/meminfo") == (None, "missing: /proc/meminfo")
    assert fs.read_int(tmp_path, "/sys/x") == (None, "missing: /sys/x")
    assert fs.list_dir(tmp_path, "sys/class/thermal") == ([], "missing: /sys/class/thermal")
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo.error").write_text("permission denied: /proc/meminfo\n")
    assert fs.read_text(tmp_path, "proc/meminfo") == (None, "permission denied: /proc/meminfo")
    (tmp_path / "proc" / "n").write_text("abc\n")
    assert fs.read_int(tmp_path, "proc/n")[1].startswith("not a number")
    assert commands.run_command(tmp_path, ["vulkaninfo", "--summary"]) == (
        None,
        "not captured: commands/vulkaninfo-summary.txt",
    )
    assert fs.read_env(tmp_path) == ({}, "not captured: env.json")


def test_unreadable_file_is_a_reason(open_tmp, unprivileged):
    f = open_tmp / "secret"
    f.write_text("x")
    f.chmod(0)
    assert unprivileged(fs.read_text, open_tmp, "secret") == (None, "permission denied: /secret")


def test_live_commands_are_tolerant():
    assert commands.run_command(fs.LIVE_ROOT, ["edgepilot-no-such-command"]) == (
        None,
        "command not found: edgepilot-no-such-command",
    )
    out, why = commands.run_command(fs.LIVE_ROOT, ["sh", "-c", "echo oops >&2; exit 3"])
    assert out is None and why == "sh -c echo oops >&2; exit 3 exited with status 3: oops"
    assert fs.command_name(["vulkaninfo", "--summary"]) == "vulkaninfo-summary"
    assert fs.command_name(["uname", "-m"]) == "uname-m"


def test_this_machine_probes_fast_and_without_error():
    start = time.perf_counter()
    p = probe("/")
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0
    assert p.cpu.cores >= 1 and p.cpu.arch
    assert p.memory.total_bytes and p.memory.available_bytes
    dumps(p)


@pytest.mark.parametrize("name", ["snap", "snap.tar.gz"])
def test_snapshot_of_this_machine_replays_identically(tmp_path, name):
    out = tmp_path / name
    result = save(out)
    assert out.exists() and result.archive == name.endswith(".tar.gz")
    assert result.files > 0
    assert dumps(probe(out)) == dumps(result.probe)
    if not result.archive:
        assert (out / "proc" / "cpuinfo").is_file() and (out / "commands" / "uname-m.txt").is_file()
        assert (out / "env.json").is_file()


def test_snapshot_of_a_tree_replays_identically(tmp_path, devices):
    for tree in ("xperia10ii-sd665", "pixel6a-tensor-g1", "x86-laptop-i7-1165g7"):
        result = save(tmp_path / tree, devices / tree)
        assert dumps(probe(tmp_path / tree)) == dumps(result.probe) == dumps(probe(devices / tree))


def test_snapshot_refuses_existing_output(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "f").write_text("x")
    with pytest.raises(UserError, match="already exists"):
        save(tmp_path / "busy")


def _tar(path: Path, members: list[tarfile.TarInfo], data: bytes = b"x") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for m in members:
            tar.addfile(m, io.BytesIO(data) if m.isfile() else None)
    return path


def test_archives_with_traversal_or_links_are_refused(tmp_path):
    evil = tarfile.TarInfo("../evil")
    evil.size = 1
    with pytest.raises(UserError, match="unsafe path"):
        probe(_tar(tmp_path / "a.tar.gz", [evil]))
    absolute = tarfile.TarInfo("/etc/evil")
    absolute.size = 1
    with pytest.raises(UserError, match="unsafe path"):
        probe(_tar(tmp_path / "b.tar.gz", [absolute]))
    link = tarfile.TarInfo("proc/cpuinfo")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    with pytest.raises(UserError, match="link or device"):
        probe(_tar(tmp_path / "c.tar.gz", [link]))
    (tmp_path / "junk.tar.gz").write_bytes(b"not a tar")
    with pytest.raises(UserError, match="not a readable snapshot"):
        probe(tmp_path / "junk.tar.gz")
    assert not (tmp_path.parent / "evil").exists()


def test_bad_roots(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        probe(tmp_path / "nope")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(UserError, match="not a directory"):
        probe(tmp_path / "file.txt")
