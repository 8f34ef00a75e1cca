"""serve says the context's limits as fit, run and chat do: above the trained context, and rounded up."""

from __future__ import annotations

import io

from rich.console import Console
from servekit import start_server, write_device

from edgepilot.cli.serve_cmd import render_started
from edgepilot.serve.server import ServeStarted


def test_serve_warns_of_a_context_above_the_trained_one(smollm_path, tmp_path):
    write_device(tmp_path / "device")
    server = start_server(
        smollm_path, "--ctx", "8300", "--watch-root", str(tmp_path / "device"), tmp=tmp_path, key=None
    )
    try:
        info = server.info
        assert info["settings"]["n_ctx"] == 8448  # what the worker made
        assert [w.split(":")[0] for w in info["warnings"]] == [
            "ctx 8300 is above the 8192 tokens the model was trained on (its GGUF declares no RoPE scaling)",
            "ctx 8300 is rounded up to 8448",
        ]
        assert not any("8192 tokens" in n for n in info["notes"])
        started = ServeStarted(**{**info, "settings": server_settings(info)})
        buf = io.StringIO()
        render_started(started, Console(width=50, file=buf, color_system=None))
        text = " ".join(buf.getvalue().split())
        assert text.count("warning: ctx 8300 is above the 8192 tokens") == 1
        assert "warning: ctx 8300 is rounded up to 8448" in text
    finally:
        assert server.stop() == 0, server.stderr()


def server_settings(info: dict):
    from edgepilot.plan.settings import EngineSettings

    return EngineSettings(**info["settings"])
