"""`edgepilot pull/models/rm` against a local hub serving real GGUF files (tests/store/hubserver.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hubserver import BIG, GEMMA, REPO, SMOL
from pullkit import one_error_line, pull, sha256, store

from edgepilot.errors import UserError
from edgepilot.store.hub import HubClient, HubError, parse_entry, safe_repo_path


def test_listing_plans_each_file_from_its_header(hub, cli_app):
    res = pull(cli_app, REPO, "--budget", "300MiB", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    fits = {c["file"]: c["fits"] for c in out["candidates"]}
    assert fits == {SMOL: True, GEMMA: False, BIG: False}
    assert out["budget_bytes"] == 300 << 20 and out["file"] is None
    big = next(c for c in out["candidates"] if c["file"] == BIG)
    assert big["quant"] == "Q4_K_M" and big["peak_rss_bytes"] > 4 << 30
    # only headers travelled: every file request was a Range request, far below the 4.4 GiB file
    for name in (SMOL, GEMMA, BIG):  # each round asks only for the bytes after the previous ones
        ranges = [r for p, r in hub.requests if p == f"/cdn/{REPO}/{name}"]
        assert ranges and ranges[0].startswith("bytes=0-")
        for before, after in zip(ranges, ranges[1:], strict=False):
            assert int(after.split("=")[1].split("-")[0]) == int(before.split("-")[1]) + 1
    assert len([r for p, r in hub.requests if p == f"/cdn/{REPO}/{BIG}"]) > 1  # its header is over 2 MiB
    assert not store().exists()
    human = pull(cli_app, REPO, "--budget", "300MiB")
    assert human.exit_code == 0 and "yes" in human.stdout and "no" in human.stdout


def test_best_downloads_the_largest_file_that_fits(hub, cli_app):
    res = pull(cli_app, REPO, "--best", "--budget", "2GiB", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["file"] == GEMMA  # the 7B does not fit 2 GiB; Gemma is larger than SmolLM2
    path = Path(out["path"])
    assert path == store() / "edge-test__small-models-GGUF" / GEMMA
    assert sha256(path) == out["sha256"] == hub.repos[REPO][GEMMA].digest()
    manifest = json.loads((store() / "manifest.json").read_text())["models"]
    assert [(m["repo"], m["file"], m["sha256"], m["commit"]) for m in manifest] == [
        (REPO, GEMMA, out["sha256"], "0123456789abcdef0123456789abcdef01234567")
    ]
    again = pull(cli_app, REPO, GEMMA, "--json")
    assert json.loads(again.stdout)["already_present"] is True


def test_a_pull_off_a_terminal_says_how_far_it_got_every_few_seconds(hub, cli_app, monkeypatch):
    """A pipe or a log gets a line every $EDGEPILOT_PROGRESS_SECONDS (5 by default): the file, the MiB
    so far of all, the time. Before: nothing until the result line."""
    monkeypatch.setenv("EDGEPILOT_PROGRESS_SECONDS", "0.05")
    hub.pace = 0.02  # about 2 s for SmolLM2's 94 MiB
    res = pull(cli_app, REPO, SMOL, "--json")
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("pull: ")]
    assert len(lines) >= 2, res.stderr
    assert all(SMOL in ln and " MiB · " in ln and ln.endswith(" s") for ln in lines), lines
    assert f" of {hub.repos[REPO][SMOL].path.stat().st_size / 2**20:.1f} MiB" in lines[-1]
    assert json.loads(res.stdout)["file"] == SMOL


def test_best_with_nothing_fitting_is_one_line(hub, cli_app):
    line = one_error_line(pull(cli_app, REPO, "--best", "--budget", "100MiB"))
    assert "no GGUF file" in line and "fits" in line


def test_an_interrupted_transfer_resumes_from_the_part_file(hub, cli_app, monkeypatch):
    monkeypatch.setenv("EDGEPILOT_PULL_TRIES", "1")  # no new try in this pull: the next pull resumes it
    hub.cut_after = 30 << 20
    line = one_error_line(pull(cli_app, REPO, SMOL))
    assert "pull again to resume" in line
    target = store() / "edge-test__small-models-GGUF" / SMOL
    part = target.with_name(SMOL + ".part")
    assert not target.exists() and part.stat().st_size == 30 << 20
    hub.requests.clear()
    monkeypatch.delenv("EDGEPILOT_PULL_TRIES")
    res = pull(cli_app, REPO, SMOL, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["resumed_from"] == 30 << 20
    assert (f"/cdn/{REPO}/{SMOL}", f"bytes={30 << 20}-") in hub.requests
    assert not part.exists() and sha256(target) == hub.repos[REPO][SMOL].digest()


def test_a_corrupted_byte_is_caught_by_the_hash(hub, cli_app):
    hub.corrupt_at = 12_345_678
    line = one_error_line(pull(cli_app, REPO, SMOL))
    assert "sha256" in line and "does not match" in line
    folder = store() / "edge-test__small-models-GGUF"
    assert not (folder / SMOL).exists() and not (folder / (SMOL + ".part")).exists()
    assert not (store() / "manifest.json").exists()


def test_missing_repo_and_file_are_one_line(hub, cli_app):
    assert "repository not found" in one_error_line(pull(cli_app, "edge-test/nothing-here"))
    line = one_error_line(pull(cli_app, REPO, "missing.gguf"))
    assert "not a file of" in line and SMOL in line
    client = HubClient()  # the hub's own 404 for a file (EntryNotFound), as a listed file that went away
    with pytest.raises(HubError, match="not found") as caught:
        client.open(client.resolve_url(REPO, "gone.gguf", "main"), what="gone.gguf")
    assert caught.value.code == "EntryNotFound"
    assert "not a repository id" in one_error_line(pull(cli_app, "../etc"))


def test_a_store_on_fuse_is_warned_about(hub, cli_app, devices):
    res = pull(
        cli_app,
        REPO,
        "--budget",
        "1GiB",
        "--store",
        "/sdcard/models",
        "--root",
        str(devices / "pixel6a-tensor-g1"),
    )
    assert res.exit_code == 0, res.output
    assert "FUSE" in res.stderr and "--store /data/data/com.termux/files/home/models" in res.stderr


def test_models_lists_and_rm_removes_only_inside_the_store(hub, cli_app, tmp_path):
    assert pull(cli_app, REPO, SMOL).exit_code == 0
    listed = json.loads(CliRunner().invoke(cli_app, ["models", "--json"]).stdout)["models"]
    assert [(m["name"], m["quant"], m["verdict"], m["repo"]) for m in listed] == [
        (f"edge-test__small-models-GGUF/{SMOL}", "Q4_1", "ok", REPO)
    ]
    for name in (f"{REPO}:{SMOL}", SMOL, f"edge-test__small-models-GGUF/{SMOL}"):  # store names resolve
        planned = CliRunner().invoke(cli_app, ["fit", name, "--budget", "1GiB", "--json"])
        assert planned.exit_code == 0, planned.output
        assert json.loads(planned.stdout)["model"] == str(store() / "edge-test__small-models-GGUF" / SMOL)
    outside = tmp_path / "keep.gguf"
    outside.write_bytes(b"GGUF")
    for name in (str(outside), "../keep.gguf", "edge-test__small-models-GGUF/../../keep.gguf"):
        assert "not in the model store" in one_error_line(CliRunner().invoke(cli_app, ["rm", name]))
    assert outside.exists()
    res = CliRunner().invoke(cli_app, ["rm", f"{REPO}:{SMOL}", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["bytes_freed"] > 90 << 20
    assert json.loads(CliRunner().invoke(cli_app, ["models", "--json"]).stdout)["models"] == []
    assert json.loads((store() / "manifest.json").read_text())["models"] == []


def test_models_lists_the_bundled_model_beside_an_empty_store(cli_app, gemma_path, tmp_path):
    """Before: "no models in ..." while `edgepilot run` without MODEL runs the bundled Gemma."""
    empty = ["models", "--store", str(tmp_path / "none-yet")]
    data = json.loads(CliRunner().invoke(cli_app, [*empty, "--json"]).stdout)
    assert data["models"] == []
    assert data["bundled"]["path"] == str(gemma_path) and data["bundled"]["verdict"] == "ok"
    text = CliRunner().invoke(cli_app, empty, env={"COLUMNS": "120"}).stdout
    entry = text[text.index(gemma_path.name) :][:400]  # a table row, or its stacked lines on a narrow screen
    assert "Q4_K_M" in entry and "bundled" in entry, text
    assert "no models pulled into" in text
    # not made yet in a fresh cache: listed from its package, and listing it writes nothing (~250 MB)
    cache = tmp_path / "fresh-cache"
    fresh = CliRunner().invoke(cli_app, [*empty, "--json"], env={"XDG_CACHE_HOME": str(cache)})
    bundled = json.loads(fresh.stdout)["bundled"]
    assert bundled["quant"] == "Q4_K_M" and bundled["size"] == gemma_path.stat().st_size
    assert not cache.exists()


@pytest.mark.parametrize(
    "name", ["../x.gguf", "/etc/passwd", "a\\b.gguf", "a/../../b.gguf", "a//b", "x\n.gguf"]
)
def test_unsafe_names_in_a_listing_are_refused(name):
    with pytest.raises(UserError):
        safe_repo_path(name)
    with pytest.raises(UserError):
        parse_entry({"type": "file", "path": name, "size": 1})


def test_a_listing_entry_needs_a_well_formed_hash():
    assert parse_entry({"type": "directory", "path": "x"}) is None
    with pytest.raises(HubError):
        parse_entry({"type": "file", "path": "a.gguf", "size": 3, "lfs": {"oid": "not-a-sha"}})


def test_a_body_longer_than_listed_is_refused(hub, cli_app):
    hub.repos[REPO][SMOL].listed_size = 1 << 20  # the listing says 1 MiB, the server sends 94 MiB
    line = one_error_line(pull(cli_app, REPO, SMOL))
    assert "announces" in line or "more than" in line
    assert not (store() / "edge-test__small-models-GGUF" / SMOL).exists()


def test_the_token_goes_to_the_hub(hub, cli_app, tmp_path):
    token = tmp_path / "token"
    token.write_text("hf_test_token\n")
    assert pull(cli_app, REPO, "--budget", "1GiB", "--token-file", str(token)).exit_code == 0
    assert hub.authorization and set(hub.authorization) == {"Bearer hf_test_token"}
    empty = tmp_path / "empty"
    empty.write_text("")
    assert "is empty" in one_error_line(pull(cli_app, REPO, "--token-file", str(empty)))
