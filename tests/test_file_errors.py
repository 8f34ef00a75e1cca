"""writable_folder's one wording, `cannot write WHAT in FOLDER: WHY; FIX`, for what needs no second user (the
refusals by permission are in tests/unprivileged): a file where the folder should be, a missing folder that is
not to be made, a name that would break the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgepilot.errors import UserError
from edgepilot.file_errors import writable_folder


def _refusal(*args: object, **kwargs: object) -> str:
    with pytest.raises(UserError) as caught:
        writable_folder(*args, **kwargs)  # type: ignore[arg-type]
    line = str(caught.value)
    assert "\n" not in line
    return line


def test_a_missing_folder_is_made_with_its_parents(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b"
    assert writable_folder(folder, "the plot", "FIX") == folder
    assert folder.is_dir()


@pytest.mark.parametrize("make", [True, False])
def test_a_file_in_the_way_is_named_with_the_fix_elsewhere(tmp_path: Path, make: bool) -> None:
    file = tmp_path / "a-file"
    file.write_text("x")
    for folder in (file, file / "models", file / "deeper" / "models"):
        line = _refusal(folder, "the model store", "FIX", "ELSEWHERE", make=make)
        assert line == f"cannot write the model store in {file}: not a directory; ELSEWHERE"
    assert (
        _refusal(file, "the plot", "FIX", make=make)
        == f"cannot write the plot in {file}: not a directory; FIX"
    )
    assert file.read_text() == "x"


def test_a_missing_folder_not_to_be_made(tmp_path: Path) -> None:
    folder = tmp_path / "missing"
    line = _refusal(folder, "the quantized model", "FIX", "ELSEWHERE", make=False)
    assert line == f"cannot write the quantized model in {folder}: no such folder; FIX"
    assert not folder.exists()


def test_a_name_that_would_break_the_line_is_escaped(tmp_path: Path) -> None:
    file = tmp_path / "two\nlines"
    file.write_text("x")
    line = _refusal(file / "models", "the snapshot", "FIX")
    assert line.startswith(f"cannot write the snapshot in {tmp_path}/two") and line.endswith(
        ": not a directory; FIX"
    )
