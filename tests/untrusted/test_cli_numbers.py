"""Numbers typed on the command line: every option of type int or float, and the flags edgepilot parses
itself (--gpu-layers, --exit-code, --rpc, --cores, sizes, durations, lists), take ASCII digits and finite
values only, and say anything else in one line with exit code 2 (before: `--gpu-layers=²` and
`bench --sustained 3 --window nan` gave tracebacks, `--ctx ٣` was read as 3)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

HOSTILE_INT = ["²", "٣", "1e3", "nan", "3.5", "𝟘"]
HOSTILE_FLOAT = ["nan", "inf", "-inf", "Infinity", "²", "٣", "1e999"]


def _numeric_options(app):
    def walk(group, path):
        for name in group.list_commands(None):  # click's API: the top group imports a module when asked
            cmd = group.get_command(None, name)
            if isinstance(cmd, click.Group):
                yield from walk(cmd, [*path, name])
                continue
            for param in cmd.params:
                if (
                    isinstance(param, click.Option)
                    and not param.is_flag
                    and param.type in (click.INT, click.FLOAT)
                ):
                    yield [*path, name], param

    return list(walk(app, []))


def _refused(app, args: list[str]):
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, (args, res.output, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), (args, res.exception)
    return res


def test_every_numeric_option_refuses_other_digits_and_non_finite_values(cli_app):
    options = _numeric_options(cli_app)
    assert len(options) > 20  # --ctx, --threads, --port, --temp, --window, ...
    for path, param in options:
        flag = max(param.opts, key=len)
        for value in HOSTILE_FLOAT if param.type is click.FLOAT else HOSTILE_INT:
            res = _refused(cli_app, [*path, f"{flag}={value}"])
            said = res.output
            refused = "is not a valid" in said or f"{value}: not a finite number" in said
            assert refused, (path, flag, value, said)


@pytest.mark.parametrize(
    "args",
    [
        ["fit", "--gpu-layers=²", "--json"],
        ["fit", "--gpu-layers", "٣"],
        ["bench", "--sustained", "3", "--window", "nan"],
        ["bench", "--sustained", "٣m"],
        ["bench", "-p", "٣"],
        ["bench", "-t", "1-²"],
        ["bench", "--cores", "fast²"],
        ["fit", "--budget", "٣GiB"],
        ["doctor", "--exit-code", "²"],
        ["run", "--rpc", "127.0.0.1:²", "-n", "1"],
    ],
    ids=" ".join,
)
def test_flags_edgepilot_parses_refuse_other_digits_in_one_line(cli_app, args):
    res = _refused(cli_app, args)
    assert "Traceback" not in res.output


def test_ascii_numbers_still_read(cli_app):
    res = CliRunner().invoke(
        cli_app, ["fit", "--ctx", "512", "--threads", "2", "--gpu-layers", "0", "--json"]
    )
    assert res.exit_code == 0, res.output
