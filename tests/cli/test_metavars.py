"""Every option's placeholder in --help says what to give: FILE, DIR, SIZE, N, the choices; never click's type
names (TEXT for a file or a choice, INTEGER, FLOAT, PATH), which say nothing about the value."""

from __future__ import annotations

import click
from click.testing import CliRunner

GENERIC = {"TEXT", "STRING", "INTEGER", "FLOAT", "PATH", "BOOLEAN", "FILENAME", "DIRECTORY"}
PROSE = {("run", "--prompt"), ("chat", "--system")}  # options that really take free text


def _options(group: click.Group, path: tuple[str, ...] = ()):
    for name in group.list_commands(None):  # click's API: the top group imports a command's module when asked
        cmd = group.get_command(None, name)
        if isinstance(cmd, click.Group):
            yield from _options(cmd, (*path, name))
            continue
        ctx = click.Context(cmd, info_name=name)
        for p in cmd.params:
            if isinstance(p, click.Option) and not (p.is_flag or p.count):
                yield (*path, name), p.opts, p.make_metavar(ctx)


def test_no_option_shows_a_type_name_as_its_placeholder(cli_app):
    seen = list(_options(cli_app))
    assert len(seen) > 100
    vague = [
        (" ".join(cmd), opts, mv)
        for cmd, opts, mv in seen
        if mv in GENERIC and not ((cmd[-1], max(opts, key=len)) in PROSE and mv == "TEXT")
    ]
    assert not vague, vague


def test_help_shows_the_placeholders(cli_app):
    text = CliRunner().invoke(cli_app, ["fit", "--help"], env={"COLUMNS": "120"}).output
    assert "--budget SIZE" in text and "--root DIR" in text and "--engine auto|inprocess|tools" in text
    text = CliRunner().invoke(cli_app, ["doctor", "--help"], env={"COLUMNS": "120"}).output
    assert "--log FILE" in text and "--memory-limit SIZE" in text
