"""What a user types first: --version, -h on every command, defaults in --help, the same default model."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner


def _invoke(cli_app, *args):
    return CliRunner().invoke(cli_app, list(args), catch_exceptions=False)


def test_version_names_edgepilot_and_the_llama_cpp_it_runs(cli_app):
    from edgepilot import __version__
    from edgepilot.engine.choice import choose_engine

    res = _invoke(cli_app, "--version")
    assert res.exit_code == 0
    first, second = res.output.splitlines()
    assert first == f"edgepilot {__version__}"
    info = choose_engine(load=False)
    assert second.startswith("llama.cpp: ") and info.llama_cpp in second


def test_version_without_any_llama_cpp_says_so(cli_app, monkeypatch, tmp_path):
    monkeypatch.setenv("EDGEPILOT_ENGINE", "tools")
    monkeypatch.setenv("EDGEPILOT_TOOLS_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("PATH", str(tmp_path))
    res = _invoke(cli_app, "--version")
    assert res.exit_code == 0 and "llama.cpp: none found" in res.output


def test_every_command_takes_dash_h(cli_app):
    def walk(group, path):  # through click's API: the top group imports a command's module when asked
        for name in group.list_commands(None):
            cmd = group.get_command(None, name)
            yield [*path, name]
            if hasattr(cmd, "commands"):
                yield from walk(cmd, [*path, name])

    commands = list(walk(cli_app, []))
    assert len(commands) > 15
    for cmd in [[], *commands]:
        res = _invoke(cli_app, *cmd, "-h")
        assert res.exit_code == 0 and "Usage:" in res.output, cmd


def test_help_shows_defaults(cli_app):
    out = _invoke(cli_app, "run", "--help").output
    assert "[default: 128]" in out  # -n
    assert "Here are three things" in out  # the prompt run uses without -p


def test_fit_defaults_to_the_bundled_model_like_run(cli_app, bundled_model):
    res = _invoke(cli_app, "fit", "--json")
    assert res.exit_code == 0
    assert json.loads(res.output)["model"] == str(bundled_model)


@pytest.fixture
def bundled_model():
    from edgepilot.gguf.resolve import bundled_model_path

    return bundled_model_path()
