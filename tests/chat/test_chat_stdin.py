"""Hostile stdin for `edgepilot chat` (stdin not a terminal), on SmolLM2 in a child process: a 20 MB line is
skipped with one line without being read whole, and invalid UTF-8 is answered, not a traceback, in a UTF-8
and in the C locale."""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

from rsskit import run_measured

MIB = 1 << 20


def chat(model, stdin: bytes, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    """(exit code, stderr, peak RSS in MiB) of one chat fed `stdin` from a file."""
    argv = [sys.executable, "-m", "edgepilot", "chat", str(model), "--temp", "0", "-n", "4", "--ctx", "1024"]
    with tempfile.TemporaryFile() as f:
        f.write(stdin)
        f.seek(0)
        return run_measured(argv, stdin=f, env=env)


def test_a_20_mb_line_is_skipped_with_one_line_and_costs_no_memory(smollm_path):
    code, err, base_rss = chat(smollm_path, b"hi\n")
    assert code == 0, err
    code, err, rss = chat(smollm_path, b"x" * 20_000_000 + b"\nhi\n")
    assert rss - base_rss < 100, f"peak RSS {rss:.0f} MiB against {base_rss:.0f} MiB for a short chat"
    assert code == 0, err
    assert "Traceback" not in err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "skipped" in errors[0] and "19.1 MiB" in errors[0], err
    assert err.count("[prompt ") == 1, err  # the chat went on: "hi" was answered


def _env(locale: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONIOENCODING", "PYTHONUTF8"))}
    env["LC_ALL"] = env["LANG"] = locale
    return env


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_invalid_utf8_on_stdin_is_answered_in_any_locale(smollm_path, locale):
    code, err, _ = chat(smollm_path, b"\xff\xfe hi\n/what\xff\xfe\n", env=_env(locale))
    assert code == 0, err
    assert "Traceback" not in err and "surrogates" not in err and "UnicodeEncodeError" not in err, err
    assert err.count("[prompt ") == 1, err
    assert "unknown command /what" in err, err
