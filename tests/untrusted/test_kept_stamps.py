"""Build stamps are kept files too: `build.stamp` beside a built llama.cpp (read by probe's GPU verdict and by
`edgepilot build`) and the bundled model's `.verified` stamp. A FIFO in their place used to block probe, build
and every command on the bundled model for good; a deeply nested stamp raised RecursionError."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from keptkit import in_place

from edgepilot.device.llama_build import read_stamp, vulkan_fix_of
from edgepilot.toolchain import builder


@pytest.fixture(autouse=True)
def never_blocks():
    def blocked(*_args):
        raise AssertionError("reading a stamp blocked")

    old = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _in_place(path: Path, kind: str) -> Path:
    head = b'{"vulkan_fix": "x", "pad": "' if kind == "huge" else b'{"vulkan_fix": "\xff\xfe"'
    return in_place(path, kind, head)


KINDS = ["fifo", "directory", "huge", "deep", "binary"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_build_stamp_that_is_no_stamp_reads_as_none(tmp_path, kind):
    stamp = _in_place(tmp_path / "build.stamp", kind)
    assert read_stamp(stamp) == {}
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "llama-server"
    tool.write_text("")
    assert vulkan_fix_of(tool) is None
    assert builder._up_to_date(stamp, '{"v": 1}', {}) is False


def test_a_stamp_as_written_is_read(tmp_path):
    stamp = tmp_path / "build.stamp"
    stamp.write_text('{"v": 1, "vulkan_fix": "mali-bda-1"}\n')
    assert read_stamp(stamp)["vulkan_fix"] == "mali-bda-1"
    assert builder._up_to_date(stamp, '{"v": 1, "vulkan_fix": "mali-bda-1"}', {}) is True


@pytest.mark.parametrize("kind", ["fifo", "directory", "binary"])
def test_the_bundled_models_stamp_in_a_fifo_never_blocks(tmp_path, monkeypatch, gemma_path, kind):
    from edgepilot.gguf import resolve

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    models = tmp_path / "edgepilot" / "models"
    models.mkdir(parents=True)
    (models / resolve.BUNDLED_NAME).symlink_to(gemma_path)
    _in_place(models / (resolve.BUNDLED_NAME + ".verified"), kind)
    made = resolve.bundled_model_made()
    assert made is not None and made[2] != models / resolve.BUNDLED_NAME  # not taken as verified
