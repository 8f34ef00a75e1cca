"""program_path.which finds what shutil.which finds (it stands in for it on the start-up path)."""

from __future__ import annotations

import os
import shutil
import stat

from edgepilot.digest import sha256_hex
from edgepilot.program_path import which


def test_which_agrees_with_shutil_on_path_folders(tmp_path, monkeypatch):
    first, second, folder = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for d in (first, second, folder):
        d.mkdir()
    (first / "tool").write_text("#!/bin/sh\n")  # not executable: skipped
    (second / "tool").write_text("#!/bin/sh\n")
    (second / "tool").chmod(stat.S_IRWXU)
    (folder / "tool").mkdir()  # a folder of that name is no program
    (first / "other").write_text("")
    (first / "other").chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", os.pathsep.join(map(str, (folder, first, first, second))))
    for name in ("tool", "other", "missing", str(second / "tool"), str(first / "tool")):
        assert which(name) == shutil.which(name), name
    assert which("tool") == str(second / "tool")
    assert which(str(first / "tool")) is None


def test_an_unset_path_uses_the_default_folders_and_an_empty_one_none(monkeypatch):
    monkeypatch.delenv("PATH")
    assert which("sh") == shutil.which("sh") is not None
    monkeypatch.setenv("PATH", "")
    assert which("sh") is None and shutil.which("sh") is None


def test_the_digest_is_sha256_small_and_large():
    import hashlib

    for data in (b"", b"abc", "ünïcode", b"x" * (1 << 17)):
        raw = data.encode() if isinstance(data, str) else data
        assert sha256_hex(data) == hashlib.sha256(raw).hexdigest()
