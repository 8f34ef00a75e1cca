"""Names from outside are shown escaped (issue #30): a file name, a model's metadata, a log line or a hub's
answer that holds a terminal escape sequence or a bidi override reaches the terminal as `\\x1b` / `\\u202e`
(as `ls` shows it), and rich markup in it is text. JSON output keeps the string as it is."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gguf"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
from hubserver import REPO, Hub, HubFile, serving  # noqa: E402
from synth import ARCHS, write_model  # noqa: E402

CLEAR = "\x1b[2J"  # clears the screen
TITLE = "\x1b]0;pwned\x07"  # sets the window title (OSC ... BEL)
RLO = "\u202e"  # right-to-left override: `fuug.exe` reads `exe.gguf`
MARKUP = "[red]x[/red] [/]"  # rich markup; a stray [/] made rich raise
NAME_MARKUP = "[bold]x[blink]"  # markup a file name can hold (no `/`)
RAW = ("\x1b", "\x07", RLO)
FOLDER = "edge-test__small-models-GGUF"


def invoke(cli_app, *args: str, columns: int = 400):
    return CliRunner().invoke(cli_app, list(args), env={"COLUMNS": str(columns)})


def assert_escaped(res, *shown: str) -> None:
    """No raw control or bidi character on stdout or stderr, and each `shown` text there as it is."""
    both = res.stdout + res.stderr
    for ch in RAW:
        assert ch not in both, repr(both)
    flat = re.sub(r"[\n│ ]+", "", both)  # a folded cell or a wrapped line, joined again
    for text in shown:
        assert text.replace(" ", "") in flat, (text, both)


@pytest.mark.parametrize("columns", [400, 50])
def test_models_escapes_a_file_name(cli_app, tmp_path, columns):
    store = tmp_path / "store"
    (store / FOLDER).mkdir(parents=True)
    name = f"evil{CLEAR}{RLO}fuug.exe{NAME_MARKUP}.gguf"
    write_model(store / FOLDER / name, ARCHS["smollm2"])
    res = invoke(cli_app, "models", "--store", str(store), columns=columns)
    assert res.exit_code == 0, res.output
    assert_escaped(res, f"evil\\x1b[2J\\u202efuug.exe{NAME_MARKUP}.gguf")
    listed = json.loads(invoke(cli_app, "models", "--store", str(store), "--json").stdout)["models"]
    assert [m["name"] for m in listed] == [f"{FOLDER}/{name}"]  # JSON: the name itself


def test_inspect_escapes_the_metadata(cli_app, tmp_path):
    path = write_model(tmp_path / f"m{RLO}.gguf", ARCHS["smollm2"], name=f"{TITLE}{MARKUP}{CLEAR}{RLO}")
    res = invoke(cli_app, "inspect", str(path))
    assert res.exit_code == 0, res.output
    assert_escaped(res, f"\\x1b]0;pwned\\x07{MARKUP}\\x1b[2J\\u202e", "m\\u202e.gguf")
    assert json.loads(invoke(cli_app, "inspect", str(path), "--json").stdout)["name"].startswith(TITLE)


def test_inspect_escapes_an_unknown_architecture(cli_app, tmp_path):
    hp = dict(ARCHS["smollm2"], arch=f"llama{CLEAR}{MARKUP}")
    path = write_model(tmp_path / "arch.gguf", hp)
    res = invoke(cli_app, "inspect", str(path))
    assert res.exit_code in (0, 1) and "Traceback" not in res.output, res.output
    assert_escaped(res, f"llama\\x1b[2J{MARKUP}")


def test_doctor_escapes_log_lines_it_quotes(cli_app, tmp_path, devices):
    log = tmp_path / f"log{CLEAR}.txt"
    log.write_text(
        f"llama_model_load_from_file_impl: loading model from '/sdcard/{RLO}x{CLEAR}.gguf'\n"
        f"llama_model_load: error loading model: tensor '{TITLE}{MARKUP}' data is not within the file "
        "bounds, model is corrupted or incomplete\n"
    )
    res = invoke(cli_app, "doctor", "--log", str(log), "--root", str(devices / "pixel6a-tensor-g1"))
    assert res.exit_code == 0, res.output
    assert "model-corrupt" in res.stdout
    assert_escaped(res, f"tensor'\\x1b]0;pwned\\x07{MARKUP}'", "\\u202ex\\x1b[2J.gguf")
    missing = invoke(cli_app, "doctor", "--log", str(log) + "-gone")  # the error line names the file
    assert missing.exit_code == 2
    assert_escaped(missing, "log\\x1b[2J.txt-gone")


@pytest.fixture
def hostile_hub(tmp_path, monkeypatch):
    served = tmp_path / "served"
    served.mkdir()
    (served / "a.gguf").write_bytes(os.urandom(4096))
    state = Hub(repos={REPO: {f"a[/]{MARKUP}.gguf": HubFile(served / "a.gguf")}})
    with serving(state, monkeypatch, tmp_path / "store"):
        yield state


def test_pull_escapes_what_the_hub_says(hostile_hub, cli_app):
    hostile_hub.listing_status = (418, f"teapot{CLEAR}{TITLE}")  # the reason phrase of an HTTP error
    res = invoke(cli_app, "pull", REPO)
    assert res.exit_code == 2, res.output
    assert_escaped(res, "teapot\\x1b[2J\\x1b]0;pwned\\x07")
    hostile_hub.listing_status = None
    hostile_hub.repos[REPO][f"x{CLEAR}{RLO}.gguf"] = hostile_hub.repos[REPO][f"a[/]{MARKUP}.gguf"]
    res = invoke(cli_app, "pull", REPO)  # a listing naming such a file is refused, the name shown escaped
    assert res.exit_code == 2, res.output
    assert_escaped(res, "x\\x1b[2J\\u202e.gguf")


def test_pull_on_a_terminal_shows_a_markup_name_as_text(hostile_hub, tmp_path):
    """The progress line and the stage lines (a terminal only) print the file name as text."""
    name = f"a[/]{MARKUP}.gguf"
    env = dict(os.environ, TTY_COMPATIBLE="1", NO_COLOR="1", COLUMNS="200")
    res = subprocess.run(
        [sys.executable, "-m", "edgepilot", "pull", REPO, name], capture_output=True, text=True, env=env
    )
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    seen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", res.stderr + res.stdout)  # rich's own cursor codes
    assert f"downloading {name}" in seen and f"{FOLDER}/{name}" in seen.replace("\n", "")


def test_what_is_escaped_and_what_is_kept():
    from edgepilot.shown import shown, shown_lines

    kept = "naïve 模型 名前 café — ok · 😀 a\u00a0b"  # letters of any script, emoji, spaces
    assert shown(kept) == kept
    assert shown("a\x1bb\x7f\x9b\u202e\u2066\u200f\u061c\u2028\n\t") == (
        "a\\x1bb\\x7f\\x9b\\u202e\\u2066\\u200f\\u061c\\u2028\\x0a\\x09"
    )
    assert shown(os.fsdecode(b"bad\x9b.gguf")) == "bad\\x9b.gguf"  # an undecodable byte of a file name
    assert shown_lines("one\x1b\n\ttwo") == "one\\x1b\n\ttwo"


def test_a_printed_command_names_a_hostile_file_and_still_pastes(tmp_path):
    """print_command's quoting: bash's $'...' for a name with escapes, which bash turns back into the name."""
    from edgepilot.shown import shell_word

    names = (f"x{CLEAR}{RLO}.gguf", "it's\nhere", os.fsdecode(b"bad\x9b"), "plain name", "back\\slash\x07")
    for name in names:
        word = shell_word(name)
        assert all(ch not in word for ch in (*RAW, "\n"))
        echoed = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True).stdout
        assert echoed == os.fsencode(name), word


def test_the_console_escapes_a_name_a_renderer_forgot():
    """The net behind the renderers: a Text built from raw data is escaped when rendered; rich's own codes
    (a terminal's colours) pass."""
    from rich.text import Text

    from edgepilot.cli.safe_console import SafeConsole

    out = SafeConsole(force_terminal=True, color_system="standard", width=80)
    with out.capture() as captured:
        out.print(Text(f"model {CLEAR}{RLO}x", style="red"))
    printed = captured.get()
    assert "\\x1b[2J\\u202ex" in printed and CLEAR not in printed and RLO not in printed
    assert "\x1b[31m" in printed  # red: rich's own escape sequence
