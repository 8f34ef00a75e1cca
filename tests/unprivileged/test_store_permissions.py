"""The model store as an ordinary user meets it (issue #30): folders and files of another user in the store,
a store it may not write. `models` lists what it can and says what it left out; `pull` and `rm` refuse with
one line naming the path and what to do, before any transfer and without touching the store.

Each test runs the real CLI as the ordinary user (tests/userkit.py) and first proves the refusal is real.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest
from permkit import one_refusal, read_only_folder, refuses_to_change, seal, tree

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
from hubserver import REPO, Hub, HubFile, start  # noqa: E402

FOLDER = "edge-test__small-models-GGUF"
FILE = "tiny.gguf"


def _entry(store: Path, name: str) -> dict:
    data = (store / name).read_bytes()
    repo_file = name.split("/", 1)[1]
    return {
        "name": name, "repo": REPO, "file": repo_file, "revision": "main", "commit": None,
        "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "time": "2025-01-01T00:00:00Z",
    }  # fmt: skip


def _store(user, smollm_path: Path, *names: str) -> Path:
    """The user's own store holding the real SmolLM2 file under each name, with its manifest."""
    store = user.home / "store"
    for name in names:
        (store / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(smollm_path, store / name)
    entries = [_entry(store, n) for n in names]
    (store / "manifest.json").write_text(json.dumps({"version": 1, "models": entries}))
    user.give(store)
    return store


def _models(user, store: Path) -> tuple[dict, str]:
    done = user.run("models", "--store", str(store), "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    human = user.run("models", "--store", str(store))
    assert human.returncode == 0, human.stderr
    return json.loads(done.stdout), human.stdout


# --- models ---------------------------------------------------------------------------------------------
def test_a_folder_the_user_cannot_list_is_left_out_with_a_note(ordinary_user, smollm_path):
    """Before: the folder was skipped in silence (the listing looked complete)."""
    store = _store(ordinary_user, smollm_path, "mine__a/a.gguf", "other__b/b.gguf")
    seal(store / "other__b")
    ordinary_user.refuses_read(store / "other__b")
    listing, human = _models(ordinary_user, store)
    assert [m["name"] for m in listing["models"]] == ["mine__a/a.gguf"]
    assert listing["models"][0]["verdict"] == "ok"
    assert listing["unreadable"] == ["other__b/: permission denied"]
    assert "not readable to you: other__b/" in " ".join(human.split())


def test_a_folder_the_user_can_list_but_not_enter_is_left_out_with_a_note(ordinary_user, smollm_path):
    """Before: a PermissionError traceback (the file's lstat inside it)."""
    store = _store(ordinary_user, smollm_path, "mine__a/a.gguf", "other__b/b.gguf")
    (store / "other__b").chmod(0o644)  # its names can be read, its entries not reached
    ordinary_user.refuses_read(store / "other__b" / "b.gguf")
    listing, human = _models(ordinary_user, store)
    assert [m["name"] for m in listing["models"]] == ["mine__a/a.gguf"]
    assert listing["unreadable"] == ["other__b/b.gguf: permission denied"]
    assert "other__b/b.gguf" in "".join(human.split())


def test_an_unreadable_manifest_still_lists_the_files(ordinary_user, smollm_path):
    """Before: the whole listing was refused ("move it away to start afresh", wrong for a mode)."""
    store = _store(ordinary_user, smollm_path, "mine__a/a.gguf")
    seal(store / "manifest.json")
    ordinary_user.refuses_read(store / "manifest.json")
    listing, human = _models(ordinary_user, store)
    listed = [(m["name"], m["verdict"], m["repo"]) for m in listing["models"]]
    assert listed == [("mine__a/a.gguf", "ok", None)]  # what the manifest would add is not known
    assert listing["unreadable"] == ["manifest.json: permission denied"]
    assert "manifest.json" in human


def test_a_store_the_user_cannot_read_is_one_line(ordinary_user, smollm_path, open_tmp):
    store = _store(ordinary_user, smollm_path, "mine__a/a.gguf")
    seal(store)
    ordinary_user.refuses_read(store)
    line = one_refusal(ordinary_user.run("models", "--store", str(store)), store, "--store")
    assert "permission denied" in line and "manifest" not in line
    sealed = seal(open_tmp / "sealed")  # a store below a folder it may not enter: before, a traceback
    ordinary_user.refuses_read(sealed)
    one_refusal(ordinary_user.run("models", "--store", str(sealed / "store")), sealed / "store", "--store")


# --- pull and rm ----------------------------------------------------------------------------------------
@pytest.fixture
def hub_url(tmp_path):
    """A local hub serving one small file (the refusals come before any transfer)."""
    served = tmp_path / FILE
    served.write_bytes(b"GGUF" + bytes(4096))
    server, url = start(Hub(repos={REPO: {FILE: HubFile(served)}}))
    yield url
    server.shutdown()
    server.server_close()


def _pull(user, url: str, store: Path):
    return user.run("pull", REPO, FILE, "--store", str(store), env={"HF_ENDPOINT": url})


def test_pull_into_a_store_the_user_cannot_write(ordinary_user, hub_url, open_tmp):
    """Before: the line named the store's lock file and said nothing of what to do."""
    store = read_only_folder(open_tmp / "store")
    ordinary_user.refuses_write(store)
    one_refusal(
        _pull(ordinary_user, hub_url, store), f"the model store in {store}: permission denied; ", "--store"
    )
    assert tree(store) == {}
    ro = read_only_folder(open_tmp / "ro")  # a store that cannot be made there: the line names that folder
    one_refusal(
        _pull(ordinary_user, hub_url, ro / "models"),
        f"the model store in {ro}: permission denied; ",
        "--store",
    )
    assert tree(open_tmp / "ro") == {}


def test_pull_into_a_repository_folder_of_another_user(ordinary_user, hub_url):
    """Before: refused only when opening the part, without saying what to do."""
    store = ordinary_user.home / "store"
    store.mkdir()
    ordinary_user.give(store)
    folder = read_only_folder(store / FOLDER)
    ordinary_user.refuses_write(folder)
    one_refusal(
        _pull(ordinary_user, hub_url, store),
        f"cannot write the model in {folder}: permission denied; ",
        "--store",
    )
    assert tree(folder) == {}
    assert not (store / "manifest.json").exists()


@pytest.mark.parametrize("leftover", [f"{FOLDER}/{FILE}.part", ".lock"])
def test_a_part_or_lock_file_of_another_user_is_named(ordinary_user, hub_url, leftover):
    """Before: the line blamed the folder ("not writable"), which the user can write; the file is the one to
    remove."""
    store = ordinary_user.home / "store"
    (store / FOLDER).mkdir(parents=True)
    ordinary_user.give(store)
    other = store / leftover
    other.write_bytes(b"GGUF" + bytes(100))
    other.chmod(0o444)
    refuses_to_change(ordinary_user, other)
    line = one_refusal(_pull(ordinary_user, hub_url, store), other, "remove it")
    assert "permission denied" in line
    assert other.read_bytes() == b"GGUF" + bytes(100)
    assert not (store / FOLDER / FILE).exists()


def test_rm_in_a_repository_folder_the_user_cannot_write_changes_nothing(ordinary_user, smollm_path):
    """Before: the manifest entry was removed, the file's unlink refused, the manifest written back."""
    store = _store(ordinary_user, smollm_path, f"{FOLDER}/{FILE}")
    folder = store / FOLDER
    folder.chmod(0o555)
    ordinary_user.refuses_write(folder)
    before = tree(store)
    done = ordinary_user.run("rm", FILE, "--store", str(store))
    one_refusal(done, f"cannot write the model store in {folder}: permission denied; ", "nothing was removed")
    after = tree(store)
    assert after.pop(".lock") == b""  # the store's lock, taken before the manifest is read
    assert after == before
