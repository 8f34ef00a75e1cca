"""The data folder as a reviewer running as an ordinary user found it: a bench history of an older schema
that the user may read but not write, a tuned profile the user may not read but may remove, and a file
where the data folder or the model store should be.

Each test runs the real CLI as the ordinary user (tests/userkit.py) and first proves the refusal is real.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from datakit import one_error_line


def in_data(folder: Path, **extra: str) -> dict[str, str]:
    return {"EDGEPILOT_DATA_DIR": str(folder), **extra}


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
