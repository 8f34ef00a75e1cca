"""Files named on the command line (a model, --prompt-file, --api-key-file, doctor --log) that the ordinary
user may not read. When a folder on the way is closed to the user, the line names that folder and what to
do: "check its mode (ls -l)" would send the user to a file whose own mode is fine."""

from __future__ import annotations

from pathlib import Path

import pytest
from datakit import (
    NO_ENTRY,
    one_error_line,
    readable_model,
    readable_tools,
    refusing,
    reopen_refused,  # noqa: F401 - autouse
)


def _engine() -> dict[str, str]:
    """run and serve look for llama.cpp before they open what they were given."""
    return {**readable_tools(), "EDGEPILOT_ENGINE": "tools"}


def _hidden(open_tmp: Path, name: str, data: bytes) -> Path:
    """`hidden/NAME`, readable by all (0o644), in a folder the user may not enter."""
    folder = open_tmp / "hidden"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    (folder / name).chmod(0o644)
    refusing(folder, NO_ENTRY)
    return folder / name


def _names_the_folder(line: str, path: Path, what: str) -> None:
    folder = path.parent
    assert f"cannot read {what} {path}: permission denied in {folder}:" in line, line
    assert "check its mode" not in line, line
    assert f"move the file or ask its owner (ls -ld {folder})" in line, line


@pytest.mark.parametrize(
    "args",
    [["inspect"], ["fit"], ["run", "-p", "Hi"], ["quantize", "--to", "Q8_0"], ["tune", "--show"]],
    ids=lambda a: a[0],
)
def test_a_model_in_a_folder_the_user_cannot_enter(ordinary_user, open_tmp, smollm_path, args):
    model = _hidden(open_tmp, "smol.gguf", smollm_path.read_bytes()[:4096])
    ordinary_user.refuses_read(model)
    done = ordinary_user.run(args[0], str(model), *args[1:], env=_engine())
    _names_the_folder(one_error_line(done.stderr), model, "model file")


@pytest.mark.parametrize(
    ("option", "what"),
    [("--prompt-file", "prompt file"), ("--api-key-file", "API key file"), ("--log", "log file")],
)
def test_a_file_in_a_folder_the_user_cannot_enter(ordinary_user, open_tmp, smollm_path, option, what):
    hidden = _hidden(open_tmp, "given.txt", b"Hi\n")
    ordinary_user.refuses_read(hidden)
    model = str(readable_model(smollm_path))
    command = {"--prompt-file": ["run", model], "--api-key-file": ["serve", model], "--log": ["doctor"]}
    done = ordinary_user.run(*command[option], option, str(hidden), env=_engine())
    _names_the_folder(one_error_line(done.stderr), hidden, what)


def test_a_model_whose_own_mode_refuses_still_points_at_its_mode(ordinary_user, open_tmp, smollm_path):
    model = open_tmp / "smol.gguf"
    model.write_bytes(smollm_path.read_bytes()[:4096])
    refusing(open_tmp / "shut", NO_ENTRY)  # a closed folder beside the file, not on its way
    model.chmod(0)
    ordinary_user.refuses_read(model)
    line = one_error_line(ordinary_user.run("inspect", str(model)).stderr)
    assert f"no permission to read model file {model}; check its mode (ls -l)" in line, line
