"""The data folder as a reviewer running as an ordinary user found it: a bench history of an older schema
that the user may read but not write, a tuned profile the user may not read but may remove, and a file
where the data folder or the model store should be.

Each test runs the real CLI as the ordinary user (tests/userkit.py) and first proves the refusal is real.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from datakit import (
    NO_WRITE,
    SHORT_BENCH,
    in_data,
    one_error_line,
    own_data,
    readable_model,
    refuses_writing,
    refusing,
    reopen_refused,  # noqa: F401 - autouse
    shut_file,
)

from edgepilot.bench.store import SCHEMA

NO_ENGINE = {"EDGEPILOT_TOOLS_DIR": "/nonexistent", "EDGEPILOT_ENGINE": "tools"}
# Schema 1: before results.repack (2) and results.device, results.n_gpu_layers (3).
SCHEMA_1 = SCHEMA.replace("    device TEXT DEFAULT 'none', n_gpu_layers INTEGER DEFAULT 0,\n", "").replace(
    "    repack INTEGER DEFAULT 1,\n", ""
)


def device_fingerprint(user) -> str:
    """This device's fingerprint as the user's edgepilot computes it (history shows this device's runs)."""
    done = user.python("from edgepilot.tuned.identity import device_id; print(device_id().fingerprint)")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def older_history(path: Path, fingerprint: str, schema: str, version: int) -> Path:
    """A history as an older edgepilot left it: one generation result of this device."""
    with sqlite3.connect(path) as con:
        con.executescript(schema)
        con.execute(
            "INSERT INTO runs (started, kind, device_fp, model_key, model_name)"
            " VALUES ('2024-01-01T00:00:00', 'bench', ?, 'k', 'old.gguf')",
            (fingerprint,),
        )
        con.execute(
            "INSERT INTO results (run_id, test, n_threads, avg_ts, stddev_ts) VALUES (1, 'tg4', 2, 9.5, 0)"
        )
        con.execute(f"PRAGMA user_version = {version}")
    con.close()
    path.chmod(0o444)
    return path


# -- F1: a history of an older schema is read without a write ---------------------------------------


@pytest.mark.parametrize("whose", ["own", "another's"])
@pytest.mark.parametrize("version, schema", [(1, SCHEMA_1), (0, SCHEMA)])
def test_an_older_read_only_history_is_shown_as_it_is(ordinary_user, open_tmp, whose, version, schema):
    """Before: "cannot write the bench history ...: attempt to write a readonly database" (the schema was
    brought up to date first), and the --no-save it suggested gave the same."""
    if whose == "own":
        folder = own_data(ordinary_user)
    else:
        folder = open_tmp / "data"
        folder.mkdir()
    db = older_history(folder / "bench.sqlite", device_fingerprint(ordinary_user), schema, version)
    if whose == "own":
        ordinary_user.give(db)
    else:
        refusing(folder, NO_WRITE)
        ordinary_user.refuses_write(folder)
    refuses_writing(ordinary_user, db)
    before = db.read_bytes()
    done = ordinary_user.run("bench", "--history", "--json", env=in_data(folder))
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(done.stdout)["entries"]
    assert entry["avg_ts"] == 9.5 and entry["device"] == "none" and entry["n_gpu_layers"] == 0
    table = ordinary_user.run("bench", "--history", "--no-save", env=in_data(folder))
    assert table.returncode == 0 and "tg4" in table.stdout, table.stderr
    assert db.read_bytes() == before and sorted(p.name for p in folder.iterdir()) == ["bench.sqlite"]


@pytest.mark.parametrize("whose", ["own", "another's"])
def test_bench_says_how_to_make_a_read_only_history_writable(ordinary_user, smollm_path, whose):
    """Before: "make it yours (chown)" for a file that was the user's already."""
    folder = own_data(ordinary_user)
    db = older_history(folder / "bench.sqlite", "elsewhere", SCHEMA_1, 1)
    if whose == "own":
        ordinary_user.give(db)
    refuses_writing(ordinary_user, db)
    model = str(readable_model(smollm_path))
    done = ordinary_user.run("bench", model, *SHORT_BENCH, env=in_data(folder, **NO_ENGINE))
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert f"cannot write the bench history {db}: it is read-only for you;" in line and "--no-save" in line
    if db.stat().st_uid == ordinary_user.uid:  # the tests run as an ordinary user: every file is its own
        assert f"chmod u+w {db}" in line and "chown" not in line
    else:
        assert "copy it" in line and "EDGEPILOT_DATA_DIR" in line and "chown" not in line


# -- F3: tune --forget removes a profile it cannot read ------------------------------------------------


def test_forget_removes_a_profile_the_user_cannot_read(ordinary_user, smollm_path):
    """Before: "cannot read the tuned profile ...: make it yours (chown)", though removing needs no read."""
    folder = own_data(ordinary_user)
    model = str(readable_model(smollm_path))
    shown = ordinary_user.run("tune", model, "--show", "--json", env=in_data(folder))
    assert shown.returncode == 0, shown.stderr
    profile = Path(json.loads(shown.stdout)["path"])
    profile.parent.mkdir()
    ordinary_user.give(profile.parent)
    shut_file(profile, "{}")
    ordinary_user.refuses_read(profile)
    done = ordinary_user.run("tune", model, "--forget", env=in_data(folder))
    assert done.returncode == 0, done.stderr
    assert not profile.exists()
    assert "forgot the tuned profile" in done.stdout and str(profile) in done.stdout  # what went
    again = ordinary_user.run("tune", model, "--forget", "--json", env=in_data(folder))
    assert again.returncode == 0 and json.loads(again.stdout)["forgotten"] is False


# -- F6: a file where a folder should be ---------------------------------------------------------------


@pytest.mark.parametrize("given_as", ["--store", "EDGEPILOT_MODELS_DIR", "EDGEPILOT_DATA_DIR"])
def test_models_refuses_a_store_that_is_a_file(ordinary_user, given_as):
    """Before: "no models in FILE", exit 0 (and rm said the model was not in the store)."""
    file = ordinary_user.home / "a-file"
    file.write_text("not a folder\n")
    args, env = ["models"], {}
    if given_as == "--store":
        args += ["--store", str(file)]
    else:
        env[given_as] = str(file)
    done = ordinary_user.run(*args, env=env)
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    named = file if given_as == "EDGEPILOT_DATA_DIR" else f"the model store {file}"  # or a folder in it
    assert line.startswith(f"edgepilot: error: {named} is not a directory") and "--store" in line
    assert (given_as == "EDGEPILOT_DATA_DIR") == ("EDGEPILOT_DATA_DIR" in line)
    removed = ordinary_user.run("rm", "x.gguf", *args[1:], env=env)  # before: "not in the model store"
    assert removed.returncode == 2 and f"{file} is not a directory" in one_error_line(removed.stderr)
    assert done.stdout == "" and file.read_text() == "not a folder\n"


def test_bench_history_refuses_a_data_folder_that_is_a_file(ordinary_user):
    """Before: "no results yet", exit 0."""
    file = ordinary_user.home / "a-file"
    file.write_text("not a folder\n")
    done = ordinary_user.run("bench", "--history", env=in_data(file))
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert f"{file} is not a directory: " in line and "EDGEPILOT_DATA_DIR" in line
    assert done.stdout == ""
