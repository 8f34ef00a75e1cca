"""A saved session that another setting cannot take: the refusal names the setting and the flag that fits."""

from __future__ import annotations

import subprocess
import sys


def _chat(model, script: str, *flags: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "edgepilot", "chat", str(model), "--temp", "0", "-n", "4", "--ctx", "256"]
    return subprocess.run([*argv, *flags], input=script, capture_output=True, text=True, timeout=300)


def test_load_names_flash_attention_and_its_flag(smollm_path, tmp_path):
    saved = tmp_path / "s.session"
    done = _chat(smollm_path, f"Hi\n/save {saved}\n", "--no-flash-attn")
    assert done.returncode == 0 and saved.is_file(), done.stderr
    done = _chat(smollm_path, f"/load {saved}\n", "--flash-attn")
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert "flash attention off (here on)" in line and "start the chat with --no-flash-attn" in line
    assert "--ctx" not in line and "--kv" not in line  # only what differs
