"""`edgepilot snapshot save` and `edgepilot build` as an ordinary user (issue #30): a snapshot into a folder
it may not write or enter, a --root it may not read, a build cache it may not write. Each is one line naming
the path and what to do, refused before the probe or the build, with nothing written.
"""

from __future__ import annotations

import shutil
import tarfile

import pytest
from permkit import one_refusal, read_only_folder, seal, tree

TREE = "pixel6a-tensor-g1"


@pytest.fixture
def device_tree(devices, open_tmp):
    """A saved device tree the user can read (the repository's may sit under a private home)."""
    copy = open_tmp / "device"
    shutil.copytree(devices / TREE, copy, symlinks=True)
    for path in [copy, *copy.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


@pytest.mark.parametrize("name", ["snap", "snap.tar.gz"])
def test_snapshot_into_a_folder_the_user_cannot_write(ordinary_user, open_tmp, device_tree, name):
    folder = read_only_folder(open_tmp / "snapshots")
    ordinary_user.refuses_write(folder)
    done = ordinary_user.run("snapshot", "save", str(folder / name), "--root", str(device_tree))
    one_refusal(done, f"cannot write the snapshot in {folder}: permission denied; ", "a folder you can write")
    assert tree(folder) == {}


def test_snapshot_into_a_folder_the_user_cannot_enter(ordinary_user, open_tmp, device_tree):
    """Before: a PermissionError traceback (the output's exists())."""
    sealed = seal(open_tmp / "sealed")
    ordinary_user.refuses_read(sealed)
    for out in (sealed / "snap", sealed / "deeper" / "snap.tar.gz"):
        done = ordinary_user.run("snapshot", "save", str(out), "--root", str(device_tree))
        one_refusal(done, out, "a folder you can write")
    assert tree(sealed) == {}


def test_snapshot_of_a_root_the_user_cannot_read(ordinary_user, open_tmp, device_tree):
    """Before: click's usage error (three lines) for a tree or archive it may not read, and a traceback for
    one in a folder it may not enter."""
    archive = open_tmp / "phone.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(device_tree, arcname=".")
    sealed = seal(open_tmp / "sealed")
    unreadable = [seal(archive), seal(device_tree), sealed / "phone.tar.gz"]
    for root in unreadable:
        ordinary_user.refuses_read(root)
        out = ordinary_user.home / "snap"
        done = ordinary_user.run("snapshot", "save", str(out), "--root", str(root))
        line = one_refusal(done, f"--root {root}: permission denied")
        assert "you can read" in line
        assert list(ordinary_user.home.iterdir()) == []


def test_snapshot_replays_for_the_user(ordinary_user, device_tree):
    """The control: the same tree, readable, saves (so the refusals above are about permissions)."""
    out = ordinary_user.home / "snap"
    done = ordinary_user.run("snapshot", "save", str(out), "--root", str(device_tree), "--json")
    assert done.returncode == 0, done.stderr
    assert (out / "snapshot.json").is_file()
    assert out.stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize("variable", ["XDG_CACHE_HOME", "EDGEPILOT_TOOLS_DIR"])
def test_build_with_a_cache_the_user_cannot_write(ordinary_user, open_tmp, variable):
    """Before: a PermissionError traceback (the tools folder's mkdir), before any download or compile."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed: build stops at the toolchain check before the cache")
    folder = read_only_folder(open_tmp / "cache")
    ordinary_user.refuses_write(folder)
    done = ordinary_user.run("build", "--tools", "llama-quantize", env={variable: str(folder)})
    line = one_refusal(
        done, f"cannot write the llama.cpp build in {folder}: permission denied; ", f"set {variable}"
    )
    assert "to a folder you can write" in line
    assert tree(folder) == {}
