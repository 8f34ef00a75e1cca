"""The command table (cli/commands.py) names every command, the module that defines it, and a summary that
`--help` shows exactly as the command's own help would: `--help` lists the commands without importing them."""

from __future__ import annotations

import importlib
import subprocess
import sys

import click
from click.testing import CliRunner

from edgepilot.cli import app
from edgepilot.cli.commands import COMMANDS


def test_each_command_comes_from_its_module_and_the_table_names_them_all():
    for name, (module, _summary) in COMMANDS.items():
        importlib.import_module(f"edgepilot.cli.{module}")
        assert name in app.commands and app.commands[name].callback, name
        assert app.commands[name].callback.__module__ == f"edgepilot.cli.{module}", name
    assert set(app.commands) == set(COMMANDS)


def test_a_summary_is_cut_as_the_command_help_would_be_at_every_width():
    for name, (module, summary) in COMMANDS.items():
        importlib.import_module(f"edgepilot.cli.{module}")
        command = app.commands[name]
        for limit in range(1, 240):
            assert click.Command(name, help=summary).get_short_help_str(limit) == command.get_short_help_str(
                limit
            ), (name, limit)


def test_help_is_the_same_before_and_after_the_commands_are_imported():
    code = (
        "import sys, importlib\n"
        "from click.testing import CliRunner\n"
        "from edgepilot.cli import app\n"
        "from edgepilot.cli.commands import COMMANDS\n"
        "before = CliRunner().invoke(app, ['--help'], terminal_width=int(sys.argv[1])).output\n"
        "assert not [m for m in sys.modules if m.endswith('_cmd')], sorted(sys.modules)\n"
        "for module, _ in COMMANDS.values():\n"
        "    importlib.import_module('edgepilot.cli.' + module)\n"
        "after = CliRunner().invoke(app, ['--help'], terminal_width=int(sys.argv[1])).output\n"
        "assert before == after, (before, after)\n"
    )
    for width in ("50", "80", "200"):
        done = subprocess.run([sys.executable, "-c", code, width], capture_output=True, text=True, timeout=99)
        assert done.returncode == 0, done.stderr[-3000:]


def test_a_subgroup_lists_its_own_commands():
    out = CliRunner().invoke(app, ["cluster", "--help"]).output
    assert "plan" in out and "bench" not in out
