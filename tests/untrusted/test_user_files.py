"""Files named on the command line (model, --prompt-file, --api-key-file, doctor --log) are opened without
blocking and refused unless regular: a FIFO or a device is one stderr line and exit 2, never a hang.

Each case runs `edgepilot` in a child with a timeout and a 4 GiB address-space limit: before the fix, open()
waited for a FIFO's writer forever and a read of /dev/zero never ended.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgepilot.untrusted import FileTooLarge, NotRegularFile, loads_json, open_regular, read_capped

MAX_SECONDS = 60  # a child imports click, rich and sometimes llama.cpp; a hang is what this guards against


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def edgepilot(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-m", "edgepilot", *args],
            capture_output=True,
            text=True,
            timeout=MAX_SECONDS,
            stdin=subprocess.DEVNULL,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"edgepilot {' '.join(args)} hung")


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgepilot: error: "), proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "{fifo}"],
        ["fit", "{fifo}", "--root", "{devices}/sd8gen2-xiaomi13pro"],
        ["run", "{fifo}"],
        ["tune", "{fifo}"],
        ["bench", "{fifo}"],
    ],
    ids=lambda a: a[0],
)
def test_a_fifo_as_the_model(args, fifo, devices):
    line = one_error_line(edgepilot(*(a.format(fifo=fifo, devices=devices) for a in args)))
    assert f"model file {fifo} is a FIFO, not a regular file" in line


def test_a_fifo_as_prompt_file(fifo, smollm_path):
    line = one_error_line(edgepilot("run", str(smollm_path), "--prompt-file", str(fifo)))
    assert f"prompt file {fifo} is a FIFO, not a regular file" in line


def test_a_fifo_as_api_key_file(fifo, smollm_path):
    line = one_error_line(edgepilot("serve", str(smollm_path), "--api-key-file", str(fifo), "--port", "0"))
    assert f"API key file {fifo} is a FIFO, not a regular file" in line


def test_a_fifo_as_doctor_log(fifo):
    line = one_error_line(edgepilot("doctor", "--log", str(fifo)))
    assert f"log file {fifo} is a FIFO, not a regular file" in line


def test_a_character_device_or_a_huge_file_is_refused(tmp_path, smollm_path):
    res = edgepilot("run", str(smollm_path), "--prompt-file", "/dev/zero")
    assert "prompt file /dev/zero is a character device, not a regular file" in one_error_line(res)
    assert "model file /dev/zero is a character device" in one_error_line(edgepilot("inspect", "/dev/zero"))
    res = edgepilot("doctor", "--log", "/dev/zero")
    assert "log file /dev/zero is a character device" in one_error_line(res)
    key = tmp_path / "key"
    with open(key, "wb") as f:
        f.truncate(1 << 30)
    res = edgepilot("serve", str(smollm_path), "--api-key-file", str(key))
    assert f"API key file {key} is larger than 64 KiB" in one_error_line(res)


def test_open_regular_never_blocks(fifo, tmp_path):
    start = time.perf_counter()
    with pytest.raises(NotRegularFile) as info:
        open_regular(fifo)
    assert info.value.kind == "a FIFO" and time.perf_counter() - start < 1.0
    with pytest.raises(IsADirectoryError):
        open_regular(tmp_path)
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "nope")
    with open_regular("/proc/self/status") as f:  # procfs reports size 0: read to EOF, within the cap
        assert b"VmRSS" in f.read()


def test_read_capped_refuses_without_reading(tmp_path):
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as f:
        f.truncate(1 << 40)  # 1 TiB: reading it would take hours
    start = time.perf_counter()
    with pytest.raises(FileTooLarge):
        read_capped(sparse, 1 << 20)
    assert time.perf_counter() - start < 1.0
    exact = tmp_path / "exact"
    exact.write_bytes(b"x" * 4096)
    assert read_capped(exact, 4096) == b"x" * 4096
    with pytest.raises(FileTooLarge):
        read_capped(exact, 4095)


def test_loads_json_depth_is_a_value_error():
    assert loads_json("[[[1]]]", max_depth=3) == [[[1]]]
    with pytest.raises(ValueError, match="nested deeper than 2 levels"):
        loads_json("[[[1]]]", max_depth=2)
    with pytest.raises(ValueError):
        loads_json("[" * 100_000)  # json's own RecursionError becomes a ValueError
    with pytest.raises(ValueError):
        loads_json('{"a": {"b": ' * 40 + "1" + "}" * 80)
