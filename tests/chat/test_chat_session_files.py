"""`/save PATH` and `/load PATH` in a real chat (SmolLM2 135M, real llama.cpp) with paths and files a user can
get wrong: `~` means the home folder in both, a NUL in the path, a folder that cannot be written, a file that
cannot be read, and session headers with one field wrong. Each is one `error:` line, the chat goes on, and a
refused file leaves the conversation and its cache as they were."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from edgepilot.engine.session_state import MAGIC

ARGV = ["chat", "--ctx", "256", "-n", "4", "--temp", "0"]


def _chat(
    model: Path,
    lines: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """(exit code, stderr) of a chat fed `lines` on stdin."""
    argv = [sys.executable, "-m", "edgepilot", ARGV[0], str(model), *ARGV[1:]]
    done = subprocess.run(
        argv, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=300, cwd=cwd, env=env
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stderr


def _errors(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("error:")]


def _stats(err: str) -> list[str]:
    """The /stats lines without the resident memory (it moves between calls)."""
    return [re.sub(r" · rss \d+ MiB$", "", ln) for ln in err.splitlines() if re.search(r" turns? · ", ln)]


def test_tilde_is_the_home_folder_for_save_and_load_and_a_nul_is_one_line(smollm_path, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")  # where the built llama.cpp is
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": cache}
    lines = ["Say hi.", "/save ~/talk.sess", "/load ~/talk.sess", f"/load {tmp_path}/a\0b.sess"]
    lines += [f"/save {tmp_path}/a\0b.sess", "/stats", "/help"]
    code, err = _chat(smollm_path, lines, cwd=tmp_path, env=env)
    assert code == 0, err
    assert re.search(rf"saved 2 messages and \d+ cached tokens to {home}/talk.sess ", err), err
    assert re.search(rf"loaded 2 messages and \d+ cached tokens from {home}/talk.sess$", err, re.M), err
    assert (home / "talk.sess").read_bytes().startswith(MAGIC)
    assert not (tmp_path / "~").exists()
    errors = _errors(err)
    assert len(errors) == 2 and all("NUL character" in ln for ln in errors), err
    assert len(_stats(err)) == 1 and "1 turn · 2 messages" in _stats(err)[0], err  # the chat went on
    assert "~ is your home folder" in " ".join(err.split())  # /help wraps at the screen's width


def _user_libllama(into: Path) -> dict[str, str]:
    """The environment with which the test user loads llama.cpp: a copy of the libraries where it can read
    them (the build edgepilot made lives in this user's cache, which may be private, e.g. under /root)."""
    from edgepilot.engine.llama_binding import library_dir
    from edgepilot.engine.native_tools import tools_dir

    own = library_dir()
    source = Path(own) if own and (Path(own) / "libllama.so").exists() else tools_dir("native") / "bin"
    into.mkdir()
    for lib in source.glob("lib*.so*"):
        shutil.copy(lib, into / lib.name, follow_symlinks=False)
    return {"LLAMA_CPP_LIB_PATH": str(into)}


def test_an_unwritable_folder_and_an_unreadable_file_are_one_line_each(ordinary_user, open_tmp, smollm_path):
    locked = ordinary_user.home / "locked.sess"
    locked.write_bytes(MAGIC + b"2\n{}")
    locked.chmod(0)
    read_only = open_tmp / "read-only"
    read_only.mkdir(mode=0o555)
    closed = open_tmp / "closed"
    closed.mkdir(mode=0)  # like root's 0o700 folders (~root), closed to the owner too when not run as root
    ordinary_user.refuses_read(locked)
    ordinary_user.refuses_write(read_only)
    ordinary_user.refuses_read(closed)
    lines = ["Say hi.", f"/save {read_only}/s.sess", f"/load {locked}", f"/save {closed}/s.sess"]
    lines += ["/stats", "/save ~/s.sess"]
    done = ordinary_user.run(
        *ARGV[:1], str(smollm_path), *ARGV[1:], input="\n".join(lines) + "\n",
        env=_user_libllama(open_tmp / "libllama"),
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    errors = _errors(done.stderr)
    assert len(errors) == 3, done.stderr
    assert "not writable" in errors[0] and "no permission to read" in errors[1], done.stderr
    assert f"permission denied in {closed}" in errors[2], done.stderr
    fix = "give /save a path in a folder you can write, e.g. /save ~/chat.sess"
    assert errors[0].endswith(fix) and errors[2].endswith(fix), done.stderr  # each says what to do instead
    assert "saved 2 messages" in done.stderr, done.stderr  # the chat went on
    assert (ordinary_user.home / "s.sess").read_bytes().startswith(MAGIC)
    assert list(read_only.iterdir()) == []  # not even a temporary file


def _session(path: Path) -> tuple[dict, bytes]:
    data = path.read_bytes()
    length, _, rest = data[len(MAGIC) :].partition(b"\n")
    return json.loads(rest[: int(length)]), rest[int(length) :]


def _write_session(path: Path, header: dict, state: bytes) -> Path:
    head = json.dumps(header).encode()
    path.write_bytes(MAGIC + f"{len(head)}\n".encode() + head + state)
    return path


# (the field the refusal names, how the header is changed): JSON's true is 1 to Python and 256.0 is 256, so
# the old comparisons took several of these
DAMAGE = [
    ("context.n_ctx", lambda h: h["context"].update(n_ctx=None)),
    ("context.n_ctx", lambda h: h["context"].update(n_ctx=float(h["context"]["n_ctx"]))),
    ("context.flash_attn", lambda h: h["context"].update(flash_attn=int(h["context"]["flash_attn"]))),
    ("context.type_k", lambda h: h["context"].update(type_k="x" * 5000)),
    ("context", lambda h: h["context"].update(extra=1)),
    ("model.size", lambda h: h["model"].update(size=float(h["model"]["size"]))),
    ("model.head_sha256", lambda h: h["model"].update(head_sha256=None)),
    ("state_bytes", lambda h: h.update(state_bytes=float(h["state_bytes"]))),
    ("tokens[0]", lambda h: h["tokens"].__setitem__(0, True)),
    ("messages[1] role", lambda h: h["messages"][1].__setitem__(0, "tool")),
    ("messages[0]", lambda h: h["messages"].__setitem__(0, ["user"])),
    ("messages", lambda h: h.update(messages=[["user", "x"]] * 257)),
    ("messages", lambda h: h.pop("messages")),
]


def test_a_session_header_is_checked_field_by_field(smollm_path, tmp_path):
    good = tmp_path / "good.sess"
    code, err = _chat(smollm_path, ["Say hi.", f"/save {good}"], cwd=tmp_path)
    assert code == 0 and good.is_file(), err
    header, state = _session(good)
    damaged = []
    for i, (_, change) in enumerate(DAMAGE):
        copy = json.loads(json.dumps(header))
        change(copy)
        damaged.append(_write_session(tmp_path / f"damaged-{i}.sess", copy, state))
    lines = [f"/load {good}", "/stats", *(f"/load {path}" for path in damaged), "/stats", "Say more."]
    code, err = _chat(smollm_path, lines, cwd=tmp_path)
    assert code == 0, err
    errors = _errors(err)
    assert len(errors) == len(DAMAGE), err
    for line, (field, _) in zip(errors, DAMAGE, strict=True):
        assert f"header's {field} " in line or f"header has no {field};" in line, (field, line)
        assert "nothing was loaded" in line
    before, after = _stats(err)
    assert before == after, err  # the messages and the cache as the good file left them
    turn = re.search(r"\[prompt (\d+) new \+ (\d+) reused", err)
    assert turn and int(turn.group(2)) > 0, err  # the next turn still reuses the loaded cache
