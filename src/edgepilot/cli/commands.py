"""The command table: which module defines each command, so that a command's module is imported only when it
runs, and `--help` lists every command without importing any (tests/cli/test_command_table.py checks the table
against the commands themselves)."""

from __future__ import annotations

from typing import Any

import click

from edgepilot.cli.help_format import Group

# name: (module in edgepilot.cli, the first sentence of its help: what `--help` shows, cut to the width)
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": (
        "bench_cmd",
        "Measure prompt (pp) and generation (tg) speed like llama-bench, pinned to chosen cores.",
    ),
    "build": (
        "build_cmd",
        "Compile llama.cpp's tools (llama-server, llama-bench, ...) from the engine's source for this "
        "device.",
    ),
    "chat": (
        "chat_cmd",
        "Talk with a model in the terminal: each turn processes only its new tokens (the KV cache stays).",
    ),
    "cluster": ("cluster_cmd", "Pool devices over llama.cpp's RPC backend."),
    "compare": (
        "quantize_cmd",
        "Size, predicted and measured peak memory, speed and quality (perplexity, KL divergence against "
        "the most precise file) of model files, each measured in a process of its own.",
    ),
    "doctor": (
        "doctor_cmd",
        "Say why a run failed: from a saved log, or by running the command (`doctor -- CMD ARGS...`).",
    ),
    "fit": (
        "fit_cmd",
        "Predict memory and pick the settings `edgepilot run` will use: never let the OS kill the run.",
    ),
    "inspect": (
        "inspect_cmd",
        "Architecture, sizes, quantization mix and validation verdict of a GGUF model.",
    ),
    "models": (
        "models_cmd",
        "List the model store: size, quantization and whether llama.cpp can load each file.",
    ),
    "probe": (
        "probe_cmd",
        "What this device is: CPU clusters and ISA, memory, Android/Termux, GPUs as llama.cpp sees them "
        "(with a crash-isolated driver check), thermal, battery, storage, and the llama.cpp engine "
        "edgepilot runs here",
    ),
    "pull": (
        "models_cmd",
        "Download a GGUF model from a Hugging Face-style hub ($HF_ENDPOINT) into the model store: "
        "resumable, sha256-checked.",
    ),
    "quantize": ("quantize_cmd", "Quantize a model with llama.cpp's quantizer into MODEL-TYPE.gguf files."),
    "rm": (
        "models_cmd",
        "Remove a model from the store (and its manifest entry); never touches files outside the store.",
    ),
    "rpc-server": (
        "cluster_cmd",
        "Lend this device's memory and CPU to a main device running `serve --rpc` (llama.cpp's rpc-server).",
    ),
    "run": (
        "run_cmd",
        "Plan settings, load the model and stream a completion; ends with prompt/generation speed.",
    ),
    "serve": ("serve_cmd", "Serve the model with an OpenAI-compatible API that stays up and stays private."),
    "snapshot": (
        "probe_cmd",
        "Save this device's relevant files and command outputs so `--root` can replay them.",
    ),
    "tune": (
        "bench_cmd",
        "Find the fastest threads x cores, flash attention and ubatch here; save them for `run` and `serve`.",
    ),
}


class LazyGroup(Group):
    """A group whose commands come from the table: each module is imported (and registers its commands on the
    group) the first time one of its commands is asked for. A subgroup, of the same class, has no table and
    behaves as click's Group."""

    def __init__(self, *args: Any, table: dict[str, tuple[str, str]] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.table = table or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.table, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.table:
            # the import statement's path, not importlib's: `python -X importtime` names only what it imports
            __import__(f"edgepilot.cli.{self.table[cmd_name][0]}")
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's list of commands, from the table for the commands not imported."""
        names = self.list_commands(ctx)
        if not self.table or not names:
            super().format_commands(ctx, formatter)
            return
        limit = formatter.width - 6 - max(map(len, names))
        rows = []
        for name in names:
            cmd = self.commands.get(name)
            if cmd is None:
                cmd = click.Command(name, help=self.table[name][1])  # shortened as the command's own help
            if not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)
