"""Tuned profiles are written through safe_write: a stale link at the old fixed temporary name
(`KEY@DEVICE.tmp`) is never written through, and an unusable data folder is one line."""

from __future__ import annotations

import pytest

from edgepilot.errors import UserError
from edgepilot.tuned.profiles import load_profile, profile_path, save_profile
from profilekit import make_profile


def test_a_stale_temporary_link_is_not_written_through(gemma_path, tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(tmp_path / "data"))
    victim = tmp_path / "elsewhere.json"
    victim.write_text("precious")
    profile = make_profile(gemma_path)
    path = profile_path(profile.model_key, profile.device_fingerprint)
    path.parent.mkdir(parents=True)
    path.with_suffix(".tmp").symlink_to(victim)
    assert save_profile(profile) == path
    assert victim.read_text() == "precious"
    assert load_profile(gemma_path) == profile


def test_a_data_folder_that_is_a_file_is_one_line(gemma_path, tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.write_text("a file")
    monkeypatch.setenv("EDGEPILOT_DATA_DIR", str(data))
    with pytest.raises(UserError, match="not a directory") as caught:
        save_profile(make_profile(gemma_path))
    assert "\n" not in str(caught.value) and "EDGEPILOT_DATA_DIR" in str(caught.value)
    assert data.read_text() == "a file"
