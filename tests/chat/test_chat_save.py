"""`/save PATH` in a real chat (SmolLM2 135M, real llama.cpp): never over the model being chatted with, never
over a device node, never through a stale temporary-name symlink; a read-only folder or a NUL in the path is
one `error:` line and the chat goes on."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from edgepilot.engine.session_state import MAGIC

READ_ONLY = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && shift && exec "$@"'


def _read_only_wrapper(folder: Path) -> list[str] | None:
    """argv prefix that runs a command with `folder` mounted read-only (a private mount namespace), or None
    where this machine does not allow it (root writes into a chmod-555 folder, so that proves nothing)."""
    wrapper = ["unshare", "-m", "sh", "-c", READ_ONLY, "sh", str(folder)]
    try:
        probe = subprocess.run(
            [*wrapper, "sh", "-c", f"! touch {folder}/probe"], capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return wrapper if probe.returncode == 0 and not (folder / "probe").exists() else None


def _char_device(tmp_path: Path) -> Path:
    path = tmp_path / "null"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except OSError:
        return Path("/dev/null")
    return path


def test_save_refuses_what_it_must_not_replace(smollm_path, tmp_path):
    model = tmp_path / "model.gguf"  # a copy: the test must not risk the installed model
    shutil.copyfile(smollm_path, model)
    model_bytes = model.read_bytes()
    device = _char_device(tmp_path)
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    wrapper = _read_only_wrapper(read_only)
    victim = tmp_path / "elsewhere.bin"
    victim.write_bytes(b"precious bytes")
    session = tmp_path / "s.sess"

    lines = ["Say hi.", f"/save {model}", f"/save {device}", f"/save {tmp_path}/a\0b.sess"]
    lines.append(f"/save {tmp_path}")
    if wrapper:
        lines.append(f"/save {read_only}/s.sess")
    lines += [f"/save {session}", f"/load {session}"]
    argv = [sys.executable, "-m", "edgepilot", "chat", str(model), "--ctx", "256", "-n", "4", "--temp", "0"]
    proc = subprocess.Popen(
        [*(wrapper or []), *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # the temporary name /save used (.NAME.PID.tmp), planted as a link to a file elsewhere before /save runs
    (tmp_path / f".{session.name}.{proc.pid}.tmp").symlink_to(victim)
    try:
        _, err = proc.communicate("\n".join(lines) + "\n", timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    expected = ["input file itself", "character device", "NUL", "is a directory"]
    expected += ["not writable"] if wrapper else []
    assert len(errors) == len(expected), err
    for line, words in zip(errors, expected, strict=True):
        assert words in line, (line, words)
    assert "saved 2 messages" in err and "loaded 2 messages" in err, err
    assert model.read_bytes() == model_bytes
    assert stat.S_ISCHR(os.stat(device).st_mode)
    assert victim.read_bytes() == b"precious bytes"
    assert session.read_bytes().startswith(MAGIC)
    assert not list(read_only.iterdir())
