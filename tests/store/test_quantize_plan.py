"""`edgepilot quantize` checks every requested type before it writes a byte (importance matrix, disk space,
existing outputs), reuses the F16 reference an earlier run made from the same source, and prints each line
once. Real processes, the real SmolLM2 135M (Q4_1) and llama.cpp's real quantizer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

EDGEPILOT = [sys.executable, "-m", "edgepilot"]
STEM = "SmolLM2-135M-Instruct"


def quantize(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EDGEPILOT, "quantize", *args, "--threads", "2"],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, COLUMNS="400"),  # no wrapping: a long path cut in two is not a line said twice
    )


def one_line(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in done.stderr, done.stderr


def test_a_second_run_into_the_same_folder_reuses_the_reference(smollm_path, tmp_path):
    first = quantize(str(smollm_path), "--to", "Q4_0", "--out", str(tmp_path))
    assert first.returncode == 0, first.stderr
    reference = tmp_path / f"{STEM}-F16.gguf"
    made = reference.stat()

    second = quantize(str(smollm_path), "--to", "Q8_0", "--out", str(tmp_path))
    assert second.returncode == 0, second.stderr
    again = reference.stat()
    assert (again.st_ino, again.st_mtime_ns) == (made.st_ino, made.st_mtime_ns)  # not remade
    assert (tmp_path / f"{STEM}-Q8_0.gguf").stat().st_size > 100 << 20
    assert "reused" in second.stdout and "made earlier" in second.stderr

    for run in (first, second):  # every line once, across stdout and stderr together
        lines = [ln.strip() for ln in (run.stdout + run.stderr).splitlines() if ln.strip()]
        twice = [ln for ln, n in Counter(lines).items() if n > 1]
        assert not twice, twice
        assert sum("dequantized to F16" in ln for ln in lines) == 1, lines


def test_a_reference_from_another_source_is_refused_before_anything(smollm_path, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert quantize(str(smollm_path), "--to", "F16", "--out", str(out)).returncode == 0
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    other = other_dir / smollm_path.name  # same name, same size, other last bytes: another model
    shutil.copyfile(smollm_path, other)
    with open(other, "r+b") as f:
        f.seek(-64, os.SEEK_END)
        f.write(bytes(64))
    before = sorted(p.name for p in out.iterdir())
    one_line(quantize(str(other), "--to", "Q4_0", "--out", str(out)), "another source", "--force")
    assert sorted(p.name for p in out.iterdir()) == before


def test_a_type_that_needs_an_imatrix_is_refused_before_anything_starts(smollm_path, tmp_path):
    done = quantize(str(smollm_path), "--to", "Q4_0,IQ2_XXS,IQ1_S", "--out", str(tmp_path), timeout=120)
    one_line(done, "IQ2_XXS, IQ1_S", "--imatrix", "nothing was quantized")
    assert list(tmp_path.iterdir()) == []  # no reference, no Q4_0 made before the refusal


def test_too_little_disk_space_is_refused_before_anything_starts(smollm_path, tmp_path):
    """The output folder is a 96 MiB tmpfs in a mount namespace of the child's own (no mount left behind):
    Q8_0 of 135M weights and its F16 reference need about 400 MiB."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    small = tmp_path / "small"
    small.mkdir()
    argv = [*EDGEPILOT, "quantize", str(smollm_path), "--to", "Q8_0", "--out", str(small), "--threads", "2"]
    script = 'mount -t tmpfs -o size=96m tmpfs "$1" || exit 77; shift; exec "$@"'
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", str(small), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode == 77 or "unshare:" in done.stderr:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    one_line(done, "free", "Q8_0", "--out")
    assert list(Path(small).iterdir()) == []
