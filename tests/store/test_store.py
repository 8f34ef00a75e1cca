"""The model store under hostile conditions (issue #25): concurrent pulls, `rm` with patterns or a damaged
manifest, markup in manifest entries, hostile `.part` files and stores, impossible sizes in a listing.

Concurrent pulls are real `edgepilot pull` processes against the hub server on 127.0.0.1 (hubserver.py).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from hubserver import REPO, SMOL, Hub, HubFile, serving
from pullkit import one_error_line, sha256

FOLDER = "edge-test__small-models-GGUF"
SMALL = [f"part-{i}.gguf" for i in range(6)]


def invoke(cli_app, *args: str):
    return CliRunner().invoke(cli_app, list(args))


def manifest(store: Path) -> list[dict]:
    return json.loads((store / "manifest.json").read_text())["models"]


def spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "edgepilot", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def small_hub(tmp_path, monkeypatch):
    """A hub whose repository holds six 256 KiB files: a download takes milliseconds, so pulls that start
    together also finish together."""
    folder = tmp_path / "served"
    folder.mkdir()
    files = {}
    for i, name in enumerate(SMALL):
        (folder / name).write_bytes(bytes([i]) * 1024 + os.urandom(255 << 10))
        files[name] = HubFile(folder / name)
    state = Hub(repos={REPO: files})
    with serving(state, monkeypatch, tmp_path / "store"):
        yield state


def pulled(store: Path, *names: str) -> None:
    """Files as `pull` leaves them, written by hand with their manifest (for the rm and models cases)."""
    entries = []
    for name in names:
        path = store / FOLDER / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"GGUF" + name.encode())
        entries.append(
            {
                "name": f"{FOLDER}/{name}",
                "repo": REPO,
                "file": name,
                "revision": "main",
                "commit": None,
                "sha256": sha256(path),
                "size": path.stat().st_size,
                "time": "2025-01-01T00:00:00Z",
            }
        )
    (store / "manifest.json").write_text(json.dumps({"version": 1, "models": entries}))


# --- 1. concurrent pulls ----------------------------------------------------------------------------
def test_concurrent_pulls_of_different_files_lose_no_manifest_entry(small_hub, tmp_path, cli_app):
    for round_ in range(3):
        store = tmp_path / f"store-{round_}"
        small_hub.gate = threading.Barrier(len(SMALL))  # the six transfers start (and end) together
        procs = [spawn("pull", REPO, name, "--store", str(store)) for name in SMALL]
        outcomes = [p.communicate(timeout=120) for p in procs]
        for p, (_, err) in zip(procs, outcomes, strict=True):
            assert p.returncode == 0 and "Traceback" not in err, err
        assert sorted(e["file"] for e in manifest(store)) == SMALL, f"round {round_}"
        listed = json.loads(invoke(cli_app, "models", "--store", str(store), "--json").stdout)["models"]
        assert sorted((m["name"], m["repo"]) for m in listed) == [(f"{FOLDER}/{n}", REPO) for n in SMALL]


def test_concurrent_pulls_of_one_file_download_it_once(hub, cli_app):
    store = Path(os.environ["EDGEPILOT_MODELS_DIR"])
    hub.hold = 1.5  # each transfer waits before its body: the three pulls overlap
    procs = [spawn("pull", REPO, SMOL, "--json") for _ in range(3)]
    outcomes = [p.communicate(timeout=180) for p in procs]
    for p, (_, err) in zip(procs, outcomes, strict=True):
        assert p.returncode == 0 and "Traceback" not in err, err
    results = [json.loads(out) for out, _ in outcomes]
    assert sorted(r["already_present"] for r in results) == [False, True, True]
    assert len([p for p, _ in hub.requests if p == f"/cdn/{REPO}/{SMOL}"]) == 1  # one transfer, two waited
    target = store / FOLDER / SMOL
    assert sha256(target) == hub.repos[REPO][SMOL].digest()
    assert [e["file"] for e in manifest(store)] == [SMOL]
    assert sorted(p.name for p in target.parent.iterdir()) == [SMOL]  # no part left behind


# --- 2. rm --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pattern", ["*", "*.gguf", f"{FOLDER}/*", "a?.gguf", "[ab].gguf", f"{REPO}:*"])
def test_rm_refuses_patterns(cli_app, tmp_path, pattern):
    store = tmp_path / "store"
    pulled(store, "a1.gguf")
    line = one_error_line(invoke(cli_app, "rm", pattern, "--store", str(store)))
    assert "pattern" in line or "not in the model store" in line
    assert (store / FOLDER / "a1.gguf").exists() and len(manifest(store)) == 1


def test_rm_takes_exact_names_only(cli_app, tmp_path):
    store = tmp_path / "store"
    pulled(store, "a1.gguf", "b1.gguf")
    (store / FOLDER / "by-hand.gguf").write_bytes(b"GGUF")  # not pulled: not rm's to delete
    for name in ("by-hand.gguf", f"{FOLDER}/by-hand.gguf", "a1", f"{FOLDER}/a1.gguf/", "A1.gguf"):
        assert "not in the model store" in one_error_line(invoke(cli_app, "rm", name, "--store", str(store)))
    assert sorted(p.name for p in (store / FOLDER).iterdir()) == ["a1.gguf", "b1.gguf", "by-hand.gguf"]
    for name in (f"{FOLDER}/a1.gguf", f"{REPO}:b1.gguf"):
        res = invoke(cli_app, "rm", name, "--store", str(store), "--json")
        assert res.exit_code == 0, res.output
    assert manifest(store) == [] and sorted(p.name for p in (store / FOLDER).iterdir()) == ["by-hand.gguf"]


@pytest.mark.parametrize("damage", [b"{not json", b'{"models": "x"}', b"[]", b"\xff\xfe", None])
def test_rm_with_a_damaged_manifest_deletes_nothing(cli_app, tmp_path, damage):
    store = tmp_path / "store"
    pulled(store, "a1.gguf")
    if damage is None:  # a manifest that is a directory
        (store / "manifest.json").unlink()
        (store / "manifest.json").mkdir()
    else:
        (store / "manifest.json").write_bytes(damage)
    line = one_error_line(invoke(cli_app, "rm", "a1.gguf", "--store", str(store)))
    assert "manifest" in line
    assert (store / FOLDER / "a1.gguf").exists()


# --- 3. markup in the manifest ----------------------------------------------------------------------
def test_markup_in_manifest_entries_is_shown_as_text(cli_app, tmp_path):
    store = tmp_path / "store"
    names = ["[/].gguf", "[bold]x[/bold].gguf", "a[/red]b.gguf", "[bold]y.gguf"]
    pulled(store, *names)
    entries = manifest(store)
    for e in entries:
        e["time"], e["revision"] = "[/][bold]", "[/]"
    (store / "manifest.json").write_text(json.dumps({"models": entries}))
    res = CliRunner().invoke(cli_app, ["models", "--store", str(store)], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    flat = res.stdout.replace("\n", "").replace(" ", "").replace("│", "")
    for name in names:
        assert name in flat
    assert "[/][bold]" in flat
    for name in (f"{FOLDER}/{names[0]}", names[3]):  # exact names with brackets are not patterns
        res = invoke(cli_app, "rm", name, "--store", str(store))
        assert res.exit_code == 0 and name in res.stdout, res.output
    assert len(manifest(store)) == 2


# --- 4. hostile .part files and stores --------------------------------------------------------------
def _part(store: Path) -> Path:
    (store / FOLDER).mkdir(parents=True, exist_ok=True)
    return store / FOLDER / f"{SMALL[0]}.part"


def test_a_part_that_is_a_directory_or_a_symlink_is_refused(small_hub, cli_app, tmp_path):
    store = tmp_path / "store"
    outside = tmp_path / "precious.txt"
    outside.write_bytes(b"keep me" * 1000)
    part = _part(store)
    part.mkdir()
    assert "directory" in one_error_line(invoke(cli_app, "pull", REPO, SMALL[0]))
    part.rmdir()
    part.symlink_to(outside)
    assert "symbolic link" in one_error_line(invoke(cli_app, "pull", REPO, SMALL[0]))
    assert outside.read_bytes() == b"keep me" * 1000
    assert not (store / FOLDER / SMALL[0]).exists()


def test_a_part_that_is_a_fifo_does_not_block(small_hub, tmp_path):
    part = _part(tmp_path / "store")
    os.mkfifo(part)
    proc = spawn("pull", REPO, SMALL[0])
    _, err = proc.communicate(timeout=60)  # it blocked forever before
    assert proc.returncode == 2 and "FIFO" in err and len(err.strip().splitlines()) == 1, err
    assert stat.S_ISFIFO(os.lstat(part).st_mode)


@pytest.mark.parametrize("what", ["lock", "manifest"])
def test_a_lock_or_manifest_that_is_not_a_file_is_one_line(small_hub, cli_app, tmp_path, what):
    store = tmp_path / "store"
    store.mkdir()
    outside = tmp_path / "precious.txt"
    outside.write_bytes(b"keep me")
    if what == "lock":
        os.mkfifo(store / ".lock")
    else:
        (store / "manifest.json").mkdir()
    line = one_error_line(invoke(cli_app, "pull", REPO, SMALL[0]))
    assert ("lock file" if what == "lock" else "manifest") in line
    assert not (store / FOLDER / SMALL[0]).exists()


def test_a_store_that_cannot_be_made_is_one_line(small_hub, cli_app, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_bytes(b"x")
    for store in (a_file, a_file / "models"):
        line = one_error_line(invoke(cli_app, "pull", REPO, SMALL[0], "--store", str(store)))
        assert "is not a directory" in line
    assert a_file.read_bytes() == b"x"


def _pull_as(cli_app, store: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli_app, ["pull", REPO, SMALL[0], "--store", store])
    return res.exit_code, res.stderr


def test_a_read_only_store_is_one_line(small_hub, cli_app, open_tmp, unprivileged):
    store = open_tmp / "store"
    pulled(store, "a1.gguf")
    (store / FOLDER).chmod(0o755)
    store.chmod(0o555)
    code, err = unprivileged(_pull_as, cli_app, str(store))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"cannot write the model store in {store}: permission denied; " in err and "--store" in err, err
    assert sorted(os.listdir(store)) == [FOLDER, "manifest.json"]
    assert sorted(os.listdir(store / FOLDER)) == ["a1.gguf"]


# --- 5. impossible sizes ------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [-5, 10**30, 20 << 40])
def test_impossible_sizes_in_a_listing_are_one_line(small_hub, cli_app, size):
    small_hub.repos[REPO][SMALL[0]].listed_size = size
    for args in ((REPO,), (REPO, SMALL[0])):
        line = one_error_line(invoke(cli_app, "pull", *args))
        assert "size" in line
    assert not Path(os.environ["EDGEPILOT_MODELS_DIR"], FOLDER).exists()


@pytest.mark.parametrize("size", [-5, 1e30, 10**30, 20 << 40, "12", True])
def test_impossible_sizes_in_the_manifest_drop_the_entry(cli_app, tmp_path, size):
    store = tmp_path / "store"
    pulled(store, "a1.gguf", "b1.gguf")
    entries = manifest(store)
    entries[0]["size"] = size
    (store / "manifest.json").write_text(json.dumps({"models": entries}))
    res = invoke(cli_app, "models", "--store", str(store), "--json")
    assert res.exit_code == 0, res.output
    repos = {m["name"]: m["repo"] for m in json.loads(res.stdout)["models"]}
    assert repos == {f"{FOLDER}/a1.gguf": None, f"{FOLDER}/b1.gguf": REPO}  # a1 is no longer trusted
    assert invoke(cli_app, "rm", "a1.gguf", "--store", str(store)).exit_code == 2  # nor removable by rm
    assert invoke(cli_app, "rm", "b1.gguf", "--store", str(store)).exit_code == 0
    assert manifest(store) == [entries[0]]  # rewritten without b1, the untrusted entry kept as it was
