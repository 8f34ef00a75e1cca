"""The ordinary user of tests/userkit.py: it runs the real CLI, and a folder it cannot write is refused to it
(as root a chmod refuses nothing, which is why the kit exists)."""

from __future__ import annotations

import os

import pytest

from userkit import is_root


def test_the_user_runs_the_cli_from_its_home(ordinary_user):
    done = ordinary_user.run("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("edgepilot ")
    who = ordinary_user.python("import os; print(os.geteuid())")
    assert int(who.stdout) == ordinary_user.uid
    if is_root():
        assert ordinary_user.uid != 0


def test_a_read_only_folder_is_refused_for_real(ordinary_user, open_tmp):
    folder = open_tmp / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    ordinary_user.refuses_write(folder)
    if is_root():
        ordinary_user.refuses_write(open_tmp)  # root's open folder: nobody may enter it, not write into it


def test_the_kit_catches_a_vacuous_test(ordinary_user):
    """Its own home is writable: refuses_write must fail there rather than pass."""
    with pytest.raises(AssertionError, match="would prove nothing"):
        ordinary_user.refuses_write(ordinary_user.home)


def test_an_unreadable_file_is_refused_for_real(ordinary_user, open_tmp):
    secret = open_tmp / "secret"
    secret.write_text("x")
    os.chmod(secret, 0o600)
    if is_root():
        ordinary_user.refuses_read(secret)
    else:  # our own file: readable to us whatever its mode bits say, except 000
        secret.chmod(0)
        ordinary_user.refuses_read(secret)
