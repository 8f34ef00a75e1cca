"""What `pull` takes from the user and from the hub before it trusts it (issue #30): a repository id the hub
cannot have is refused before any request, and a small file kept in git (no LFS sha256 in the listing) is
checked against its git blob id before it is moved into place. Against the hub server on 127.0.0.1."""

from __future__ import annotations

import json
import os

import pytest
from hubserver import README, REPO, Hub, HubFile, git_blob_id, serving
from pullkit import one_error_line, pull, store

from edgepilot.store.hub import parse_entry

FOLDER = "edge-test__small-models-GGUF"
CONFIG = b'{"architectures": ["LlamaForCausalLM"], "vocab_size": 49152}\n'


@pytest.fixture
def git_hub(tmp_path, monkeypatch):
    """A hub whose repository holds small files kept in git (listed with their blob id, no `lfs`)."""
    served = tmp_path / "served"
    served.mkdir()
    for name, data in (("config.json", CONFIG), ("tokenizer.json", b"x" * 1000)):
        (served / name).write_bytes(data)
    files = {name: HubFile(served / name, lfs=False) for name in ("config.json", "tokenizer.json")}
    state = Hub(repos={REPO: files})
    with serving(state, monkeypatch, tmp_path / "store"):
        yield state


@pytest.mark.parametrize(
    "repo",
    [
        f"{REPO}\n",  # `$` matches before a trailing newline
        f"{REPO}\r",
        f"{REPO}\0",
        "edge--test/models",
        "edge-test/small..models",
        "-edge/models",
        "edge/models-",
        "edge/.models",
        "edge./models",
        "edge/models.git",
        "edge/" + "m" * 97,
        "edge/models/more",
        "models",
        "edge/mod els",
        "edge/modèls",
        "../etc",
    ],
)
def test_a_repo_id_the_hub_cannot_have_is_refused_before_any_request(git_hub, cli_app, repo):
    line = one_error_line(pull(cli_app, "--", repo))  # "--": "-edge/models" is no option
    assert "is not a repository id" in line, line
    assert git_hub.requests == []


@pytest.mark.parametrize("repo", ["_edge/models_", "e/" + "m" * 96, "Edge.Test/small-models_GGUF"])
def test_repo_ids_the_hub_allows_reach_it(git_hub, cli_app, repo):
    assert "repository not found" in one_error_line(pull(cli_app, repo))
    assert git_hub.requests == [(f"/api/models/{repo}/tree/main", None)]


def test_a_small_file_kept_in_git_is_checked_against_its_blob_id(git_hub, cli_app):
    assert parse_entry(git_hub.repos[REPO]["config.json"].entry("config.json")).git_oid == git_blob_id(CONFIG)
    res = pull(cli_app, REPO, "config.json", "--json")
    assert res.exit_code == 0, res.output
    target = store() / FOLDER / "config.json"
    assert json.loads(res.stdout)["path"] == str(target) and target.read_bytes() == CONFIG
    assert (f"/{REPO}/resolve/main/config.json", None) in git_hub.requests  # served without a redirect
    said = " ".join(pull(cli_app, REPO, "tokenizer.json").stdout.split())  # the hub lists no sha256 for it
    assert f"(git blob id {git_blob_id(b'x' * 1000)} matches the hub)" in said, said
    readme = pull(cli_app, REPO, "README.md", "--json")  # the hub's own listing entry, oid and all
    assert readme.exit_code == 0, readme.output
    assert (store() / FOLDER / "README.md").read_bytes() == README


def test_a_small_file_that_is_not_the_listed_one_is_refused_and_nothing_is_kept(git_hub, cli_app):
    served = git_hub.repos[REPO]["tokenizer.json"]
    served.git_oid = git_blob_id(b"x" * 1000)  # what the listing says; the server now sends other bytes
    served.path.write_bytes(b"y" * 1000)
    line = one_error_line(pull(cli_app, REPO, "tokenizer.json"))
    assert "git blob id" in line and "does not match" in line and served.git_oid in line, line
    folder = store() / FOLDER
    assert not folder.exists()  # the folder this pull made is gone with it (before: left empty)
    assert not (store() / "manifest.json").exists()
    assert pull(cli_app, REPO, "config.json").exit_code == 0
    assert "does not match" in one_error_line(pull(cli_app, REPO, "tokenizer.json"))
    assert sorted(p.name for p in folder.iterdir()) == ["config.json"]  # a folder it did not make is kept


def test_a_small_file_changed_on_the_hub_is_pulled_again(git_hub, cli_app):
    assert pull(cli_app, REPO, "config.json").exit_code == 0
    path = git_hub.repos[REPO]["config.json"].path
    changed = CONFIG.replace(b"49152", b"32000")
    path.write_bytes(changed)  # the same size: only the blob id tells them apart
    res = pull(cli_app, REPO, "config.json", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["already_present"] is False
    assert (store() / FOLDER / "config.json").read_bytes() == changed
    assert os.path.getsize(path) == len(CONFIG)


def test_a_revision_with_slashes_reaches_the_hub_as_one_segment_quoted_once(git_hub, cli_app):
    """huggingface_hub quotes a revision once with safe="" (refs/pr/1 -> refs%2Fpr%2F1). Before: quoted
    twice (refs%252Fpr%252F1), a revision no hub has."""
    git_hub.revisions = ("main", "refs/pr/1")
    res = pull(cli_app, REPO, "config.json", "--revision", "refs/pr/1", "--json")
    assert res.exit_code == 0, res.output
    assert (store() / FOLDER / "config.json").read_bytes() == CONFIG
    tree, resolve = f"/api/models/{REPO}/tree/refs%2Fpr%2F1", f"/{REPO}/resolve/refs%2Fpr%2F1/config.json"
    assert git_hub.sent_paths == [tree, tree, resolve]  # the listing's two pages, then the file


@pytest.mark.parametrize("revision", ["main\n", "ma in", "main\t", "\x1b[31mmain", "", "r" * 256])
def test_a_revision_that_cannot_be_one_is_refused_before_any_request(git_hub, cli_app, revision):
    line = one_error_line(pull(cli_app, REPO, "config.json", "--revision", revision))
    assert "is not a revision" in line, line
    assert git_hub.requests == []


def test_the_longest_revision_allowed_reaches_the_hub(git_hub, cli_app):
    assert "revision not found" in one_error_line(pull(cli_app, REPO, "--revision", "r" * 255))
    assert git_hub.sent_paths == [f"/api/models/{REPO}/tree/{'r' * 255}"]
