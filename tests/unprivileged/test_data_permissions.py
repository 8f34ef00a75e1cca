"""The data folder (EDGEPILOT_DATA_DIR) as an ordinary user meets it when it is not theirs: one a `sudo
edgepilot ...` made, another user's folder, a file left read-only. Each refusal is real for the user
(refuses_write / refuses_read first). What a command needs gives one `edgepilot: error:` line naming the
path and what to do, exit 2, before anything is measured and with nothing written; what it can do without
(tuned profiles for a run, a calibration, a check cache, a record for the doctor) is one note, and the
command carries on.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from datakit import (
    NO_ENTRY,
    NO_WRITE,
    SHORT_BENCH,
    in_data,
    notes,
    one_error_line,
    own_data,
    read_as_owner,
    readable_model,
    readable_tools,
    refuses_writing,
    refusing,
    reopen_refused,  # noqa: F401 - autouse
    shut_file,
)

from edgepilot.bench.store import connect

FIX = "EDGEPILOT_DATA_DIR"
# No llama.cpp for the user: a command that got past its check of the data folder fails on that instead,
# which shows the refusal comes before anything is measured.
NO_ENGINE = {"EDGEPILOT_TOOLS_DIR": "/nonexistent", "EDGEPILOT_ENGINE": "tools"}
SHORT_TUNE = ("-p", "16", "-n", "4", "-r", "1", "--device", "none")
SHORT_RUN = ("-n", "2", "-p", "Hi", "--ctx", "256", "--no-preload", "--engine", "tools")


def empty_history(path: Path) -> Path:
    with connect(path):
        pass
    return path


# -- the bench history -----------------------------------------------------------------------------


def test_history_in_a_data_folder_the_user_cannot_enter(ordinary_user, open_tmp):
    folder = refusing(open_tmp / "data", NO_ENTRY)
    ordinary_user.refuses_read(folder)
    done = ordinary_user.run("bench", "--history", env=in_data(folder))
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert f"cannot read the bench history {folder}/bench.sqlite: permission denied in {folder}" in line
    assert FIX in line


def test_a_history_the_user_cannot_read(ordinary_user):
    db = empty_history(own_data(ordinary_user) / "bench.sqlite")
    db.chmod(0)
    ordinary_user.refuses_read(db)
    done = ordinary_user.run("bench", "--history", env=in_data(db.parent))
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert f"cannot read the bench history {db}: permission denied;" in line and FIX in line


def test_a_read_only_history_is_shown(ordinary_user, open_tmp):
    """A history the user may read but not write (a `sudo edgepilot bench` made it) is shown, not called
    unusable: showing it writes nothing."""
    folder = open_tmp / "data"
    db = empty_history(folder / "bench.sqlite")
    db.chmod(0o444)
    refusing(folder, NO_WRITE)
    ordinary_user.refuses_write(folder)
    done = ordinary_user.run("bench", "--history", "--json", env=in_data(folder))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["db_path"] == str(db)


@pytest.mark.parametrize("command, what", [("bench", "the bench history"), ("tune", "the tuned profiles")])
def test_bench_and_tune_refuse_an_unwritable_data_folder_before_measuring(
    ordinary_user, open_tmp, smollm_path, command, what
):
    folder = refusing(open_tmp / "data", NO_WRITE)
    ordinary_user.refuses_write(folder)
    model = str(readable_model(smollm_path))
    flags = SHORT_BENCH if command == "bench" else SHORT_TUNE
    done = ordinary_user.run(command, model, *flags, env=in_data(folder, **NO_ENGINE))
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert f"cannot write {what} in {folder}: permission denied" in line
    assert FIX in line and "--no-save" in line
    assert list(folder.iterdir()) == []


def test_bench_refuses_a_read_only_history_before_measuring(ordinary_user, smollm_path):
    db = empty_history(own_data(ordinary_user) / "bench.sqlite")
    db.chmod(0o444)
    refuses_writing(ordinary_user, db)
    before = db.read_bytes()
    model = str(readable_model(smollm_path))
    done = ordinary_user.run("bench", model, *SHORT_BENCH, env=in_data(db.parent, **NO_ENGINE))
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert f"cannot write the bench history {db}: it is read-only for you" in line and "--no-save" in line
    assert db.read_bytes() == before and sorted(os.listdir(db.parent)) == ["bench.sqlite"]


# -- tuned profiles --------------------------------------------------------------------------------


def test_tune_refuses_a_profiles_folder_of_another_user(ordinary_user, smollm_path):
    profiles = refusing(own_data(ordinary_user) / "profiles", NO_WRITE)
    ordinary_user.refuses_write(profiles)
    model = str(readable_model(smollm_path))
    done = ordinary_user.run("tune", model, *SHORT_TUNE, env=in_data(profiles.parent, **NO_ENGINE))
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert f"cannot write the tuned profiles in {profiles}: permission denied" in line and FIX in line


def test_tune_show_says_when_the_profiles_cannot_be_read(ordinary_user, smollm_path):
    profiles = refusing(own_data(ordinary_user) / "profiles", NO_ENTRY)
    ordinary_user.refuses_read(profiles)
    done = ordinary_user.run("tune", str(readable_model(smollm_path)), "--show", env=in_data(profiles.parent))
    assert done.returncode == 2  # not "no tuned profile": there may well be one
    line = one_error_line(done.stderr)
    assert f"cannot read the tuned profiles {profiles}: permission denied" in line and FIX in line


def test_tune_forget_in_a_profiles_folder_of_another_user(ordinary_user, smollm_path):
    folder = own_data(ordinary_user)
    model = str(readable_model(smollm_path))
    shown = ordinary_user.run("tune", model, "--show", "--json", env=in_data(folder))
    assert shown.returncode == 0, shown.stderr
    profile = Path(json.loads(shown.stdout)["path"])  # where this user's device and model put it
    profile.parent.mkdir()
    profile.write_text("{}")
    refusing(profile.parent, NO_WRITE)
    ordinary_user.refuses_write(profile.parent)
    done = ordinary_user.run("tune", model, "--forget", env=in_data(folder))
    assert done.returncode == 2
    line = one_error_line(done.stderr)
    assert f"cannot remove the profile {profile}: permission denied in {profile.parent}" in line
    assert FIX in line and profile.read_text() == "{}"


def test_fit_plans_without_profiles_it_cannot_read(ordinary_user, open_tmp, smollm_path):
    folder = refusing(open_tmp / "data", NO_ENTRY)
    ordinary_user.refuses_read(folder)
    done = ordinary_user.run("fit", str(readable_model(smollm_path)), "--json", env=in_data(folder))
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["fits"] is True
    (note,) = notes(done.stderr)
    assert f"cannot read the tuned profiles in {folder}/profiles (permission denied in {folder})" in note
    assert "planning without them" in note and FIX in note


# -- a run's calibration (the tools engine) ----------------------------------------------------------


def test_a_run_carries_on_when_its_calibration_cannot_be_kept(ordinary_user, open_tmp, smollm_path):
    folder = refusing(open_tmp / "data", NO_WRITE)
    ordinary_user.refuses_write(folder)
    model = str(readable_model(smollm_path))
    env = in_data(folder, **readable_tools())
    done = ordinary_user.run("run", model, *SHORT_RUN, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    said = notes(done.stderr)  # one per store it does without: the calibration, the bandwidth figure
    (note,) = [n for n in said if "memory calibration" in n]
    assert f"this run's memory figures are not kept: cannot write the memory calibration in {folder}" in note
    assert FIX in note and list(folder.iterdir()) == []
    assert all(str(folder) in n for n in said) and len(said) == len(set(said)), said


def test_a_calibration_the_user_cannot_read_is_neither_used_nor_written_over(ordinary_user, smollm_path):
    folder = own_data(ordinary_user)
    calibration = folder / "calibration"
    calibration.mkdir()
    ordinary_user.give(calibration)
    env = in_data(folder, **readable_tools())
    model = str(readable_model(smollm_path))
    first = ordinary_user.run("run", model, *SHORT_RUN, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    (kept,) = calibration.iterdir()  # what the first run learnt, now shut to the user
    before = kept.read_text()
    shut_file(kept, before)
    ordinary_user.refuses_read(kept)
    done = ordinary_user.run("run", model, *SHORT_RUN, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    (note,) = notes(done.stderr)
    assert f"cannot read the memory calibration {kept} (permission denied)" in note
    assert read_as_owner(kept) == before


# -- the GPU check cache (probe, with stand-in llama.cpp programs) -------------------------------------


def probe_env(user, tmp: Path, folder: Path) -> dict[str, str]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "device"))
    from gpukit import fake_tools

    fake_tools(tmp / "bin", "segv")
    user.give(tmp / "bin")
    path = f"{tmp / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    return in_data(folder, PATH=path, EDGEPILOT_TOOLS_DIR=str(tmp / "no-built-tools"))


def test_probe_carries_on_when_its_check_cannot_be_remembered(ordinary_user, open_tmp):
    folder = refusing(open_tmp / "data", NO_WRITE)
    ordinary_user.refuses_write(folder)
    done = ordinary_user.run("probe", "--json", env=probe_env(ordinary_user, open_tmp, folder))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    (gpu,) = [g for g in json.loads(done.stdout)["gpus"] if g["llama_cpp_name"] == "Vulkan0"]
    assert gpu["verdict"] == "crashed"
    said = [line for line in done.stderr.splitlines() if "not remembered" in line]
    assert said and f"cannot write the GPU check cache in {folder}: permission denied" in said[0]
    assert FIX in said[0] and list(folder.iterdir()) == []


def test_probe_does_not_write_over_a_check_cache_it_cannot_read(ordinary_user, open_tmp):
    folder = own_data(ordinary_user)
    cache = shut_file(folder / "gpu-checks.json", '{"format": 1, "checks": {"kept": {"ok": true}}}')
    ordinary_user.refuses_read(cache)
    done = ordinary_user.run("probe", "--json", env=probe_env(ordinary_user, open_tmp, folder))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    (note,) = notes(done.stderr)
    assert f"cannot read the GPU check cache {cache} (permission denied)" in note and FIX in note
    assert "kept" in read_as_owner(cache)


# -- the cluster plan's record for the doctor ---------------------------------------------------------


def cluster_plan(user, model: str, folder: Path):
    args = ["cluster", "plan", model, "--ctx", "512", "--main-budget", "150MiB"]
    args += ["--helper", "10.0.0.2:50052=200MiB", "--link", "usb", "--speed", "50,100", "--json"]
    return user.run(*args, env=in_data(folder))


def test_cluster_plan_does_not_write_over_records_it_cannot_read(ordinary_user, smollm_path):
    folder = own_data(ordinary_user)
    records = shut_file(folder / "cluster-plans.json", '{"10.0.0.9:50052": {"rpc": ["10.0.0.9:50052"]}}')
    ordinary_user.refuses_read(records)
    done = cluster_plan(ordinary_user, str(readable_model(smollm_path)), folder)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    said = [n for n in json.loads(done.stdout)["notes"] if "not kept" in n]
    assert said and f"cannot read the cluster plan records {records}: permission denied" in said[0]
    assert "10.0.0.9" in read_as_owner(records) and "10.0.0.2" not in read_as_owner(records)


def test_the_doctor_notes_records_it_cannot_read(ordinary_user, open_tmp):
    folder = own_data(ordinary_user)
    records = shut_file(folder / "cluster-plans.json", "{}")
    ordinary_user.refuses_read(records)
    log = open_tmp / "run.log"
    log.write_text(
        "load_tensors: RPC0[10.0.0.2:50052] model buffer size = 10.00 MiB\n"
        "llama_perf_context_print:        eval time =    1000.00 ms /    10 runs   (  100.00 ms per token,"
        "    10.00 tokens per second)\n"
    )
    done = ordinary_user.run("doctor", "--log", str(log), env=in_data(folder))
    assert done.returncode == 0, done.stderr[-3000:]
    (note,) = notes(done.stderr)
    assert f"cannot read the cluster plan records {records} (permission denied)" in note and FIX in note
