"""A word is never split at 50 columns: a path wider than the screen is printed whole on one line (the
terminal soft-wraps it; copied, it is still one path), prose wraps at spaces, and `--help` never cuts a word.
Before, fit's header and doctor's cut the path where the width ran out, chat's notes were one long line the
terminal cut mid-word, and click's help cut `$EDGEPILOT_ENGINE` into `$EDGEPILOT_` / `ENGINE`."""

from __future__ import annotations

import os
import re
import sys

import click
from click.testing import CliRunner
from rich.cells import cell_len
from test_widths import WIDTHS, render

from edgepilot.cli import app

NARROW_ENV = {**os.environ, "COLUMNS": "50"}


def whole_on_a_line(text: str, word: str) -> bool:
    return any(word in line for line in text.splitlines())


def wrapped_at_spaces(text: str, width: int) -> None:
    """No line wider than the screen unless it is one word by itself."""
    for line in text.splitlines():
        assert cell_len(line) <= width or not re.search(r"\s", line.strip()), f"over {width}:\n{text}"


def test_fit_header_keeps_the_model_path_whole(smollm_path):
    from edgepilot.cli.fit_render import render_fit
    from edgepilot.tuned.decide import decide

    plan = decide(smollm_path).plan
    assert len(plan.model) > 50 and plan.model.endswith(smollm_path.name)
    for width in WIDTHS:  # the header (the commands below name it whole too)
        assert render(render_fit, plan, width).splitlines()[0] == plan.model


def test_run_refusal_keeps_the_model_path_whole(smollm_path):
    res = CliRunner().invoke(app, ["run", str(smollm_path), "-n", "4", "--budget", "50MiB"], env=NARROW_ENV)
    assert res.exit_code != 0 and "does not fit" in res.stderr, res.output
    assert res.stderr.splitlines()[0] == str(smollm_path), res.stderr  # the header


def test_doctor_header_keeps_the_program_path_whole(tmp_path):
    program = tmp_path / "a-folder-with-a-name-long-enough-for-fifty-columns" / "python"
    program.parent.mkdir()
    program.symlink_to(sys.executable)
    res = CliRunner().invoke(app, ["doctor", "--", str(program), "-c", "pass"], env=NARROW_ENV)
    assert res.exit_code == 0, res.output
    head = res.stdout[: res.stdout.index("1. ")]
    assert head.startswith("doctor:") and whole_on_a_line(head, str(program)), res.stdout
    assert "exit status 0" in " ".join(head.split())
    wrapped_at_spaces(res.stdout, 50)


def test_chat_notes_wrap_at_spaces_with_the_path_whole(smollm_path):
    res = CliRunner().invoke(
        app, ["chat", "--temp", "0", "-n", "4"], input="Hi\n/help\n", env=NARROW_ENV
    )  # the bundled base model: the note names the instruct model's path
    assert res.exit_code == 0, res.output
    note = res.stderr[res.stderr.index("note: ") : res.stderr.index("[prompt ")]
    assert len(note.splitlines()) > 1 and whole_on_a_line(note, str(smollm_path)), note
    assert "use an instruct model: `edgepilot chat" in " ".join(note.split())
    ours = [ln for ln in res.stderr.splitlines() if not ln.startswith("[prompt ")]  # the status: one line
    wrapped_at_spaces("\n".join(ours), 50)
    assert "commands: /reset (forget the conversation)" in res.stderr  # /help, wrapped too


def _commands(group: click.Group, path: list[str]):
    for name in group.list_commands(None):  # click's API: the top group imports a command's module when asked
        command = group.get_command(None, name)
        yield [*path, name], command
        if isinstance(command, click.Group):
            yield from _commands(command, [*path, name])


def test_help_never_splits_a_word():
    """Every word of every option's help is whole in `--help` at 50 columns."""
    checked = 0
    for path, command in _commands(app, []):
        res = CliRunner().invoke(app, [*path, "--help"], terminal_width=50)  # the runner ignores $COLUMNS
        assert res.exit_code == 0, res.output
        for param in (p for p in command.params if not getattr(p, "hidden", False)):
            for word in (getattr(param, "help", None) or "").split():
                assert word in res.output, f"{' '.join(path)} {param.name}: {word!r} split\n{res.output}"
                checked += 1
        wrapped_at_spaces(res.output, 50)
    assert checked > 500
    quantize = CliRunner().invoke(app, ["quantize", "--help"], terminal_width=50).output
    assert "Q8_0,Q6_K,Q4_K_M,Q3_K_M,..." in quantize  # was `Q8_0,Q` / `6_K,...`
