"""Read a supervised command line: which model it loads and with which settings, and rewrite its context flag.

Understands llama.cpp's binaries (llama-cli, llama-server, llama-bench, ...), `edgepilot run/serve/bench`,
and anything else that names a .gguf file on its command line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.plan.requested import RequestedSettings, merged
from edgepilot.plan.settings import EngineSettings

# Flags that take a value, as llama.cpp and `edgepilot run` spell them.
_CTX = {"-c", "--ctx-size", "--ctx"}
_BATCH = {"-b", "--batch-size", "--batch"}
_UBATCH = {"-ub", "--ubatch-size", "--ubatch"}
_THREADS = {"-t", "--threads"}
_TYPE_K = {"-ctk", "--cache-type-k"}
_TYPE_V = {"-ctv", "--cache-type-v"}
_KV = {"--kv"}
_MODEL = {"-m", "--model"}
_NGL = {"-ngl", "--n-gpu-layers", "--gpu-layers"}
_EDGEPILOT_VALUE_FLAGS = {
    "-p", "--prompt", "--prompt-file", "-n", "--n-predict", "--temp", "--seed", "--root", "--budget",
    "--host", "--port", "--api-key", "--sha256", "--max-temp", "--watch-root",
    *_CTX, *_BATCH, *_UBATCH, *_THREADS, *_KV,
}  # fmt: skip
_OFF_SWITCHES = {"--no-flash-attn": "flash_attn", "--no-mmap": "use_mmap", "--no-repack": "repack"}
EDGEPILOT_MODEL_COMMANDS = {"run", "serve", "bench", "tune", "fit", "inspect"}


@dataclass
class CommandFacts:
    tool: str  # "llama.cpp", "edgepilot", "other"
    model: str | None = None
    model_is_default: bool = False  # `edgepilot run` without MODEL: the bundled Gemma
    settings: RequestedSettings = field(default_factory=RequestedSettings)  # what the command line asked for
    n_gpu_layers: int | None = None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _split(arg: str) -> tuple[str, str | None]:
    if arg.startswith("--") and "=" in arg:
        flag, value = arg.split("=", 1)
        return flag, value
    return arg, None


def parse_command(argv: list[str]) -> CommandFacts:
    if not argv:
        return CommandFacts(tool="other")
    prog = os.path.basename(argv[0])
    args = list(argv[1:])
    if prog in {"python", "python3"} and args[:2] == ["-m", "edgepilot"]:
        prog, args = "edgepilot", args[2:]
    if prog == "edgepilot":
        return _parse_edgepilot(args)
    facts = CommandFacts(tool="llama.cpp" if prog.startswith("llama") else "other")
    _parse_flags(args, facts)
    if facts.model is None:
        facts.model = next((a for a in args if a.endswith(".gguf")), None)
    return facts


def _parse_flags(args: list[str], facts: CommandFacts, positional: list[str] | None = None) -> None:
    s: dict[str, object] = {}
    i = 0
    while i < len(args):
        flag, inline = _split(args[i])
        takes = inline is None
        value = inline if not takes else (args[i + 1] if i + 1 < len(args) else None)
        step = 2 if takes else 1  # a flag with a value; switches and unknown flags set step = 1
        if flag in _CTX:
            s["n_ctx"] = _int(value)
        elif flag in _BATCH:
            s["n_batch"] = _int(value)
        elif flag in _UBATCH:
            s["n_ubatch"] = _int(value)
        elif flag in _THREADS:
            s["n_threads"] = _int(value)
        elif flag in _TYPE_K:
            s["type_k"] = value
        elif flag in _TYPE_V:
            s["type_v"] = value
        elif flag in _KV:
            s["type_k"] = s["type_v"] = value
        elif flag in _MODEL:
            facts.model = value
        elif flag in {"-lm", "--load-mode"}:
            s["use_mmap"] = None if value is None else value in {"auto", "mmap", "mmap+mlock"}
        elif flag in _NGL:
            facts.n_gpu_layers = _int(value)
        elif flag in {"-fa", "--flash-attn"}:
            # llama.cpp: `-fa on|off|auto` (newer) or a bare switch (older); edgepilot: a bare switch.
            if value in {"on", "off", "auto"}:
                s["flash_attn"] = value == "on"
            else:
                s["flash_attn"], step = True, 1
        elif flag in _OFF_SWITCHES:
            s[_OFF_SWITCHES[flag]] = False
            step = 1
        elif positional is not None and not flag.startswith("-"):
            positional.append(flag)
            step = 1
        elif positional is None or flag not in _EDGEPILOT_VALUE_FLAGS:
            step = 1  # a switch, or a flag we do not know (its value, if any, is looked at and skipped next)
        i += step
    facts.settings = merged(facts.settings, RequestedSettings(**s))


def _parse_edgepilot(args: list[str]) -> CommandFacts:
    facts = CommandFacts(tool="edgepilot")
    sub = args[0] if args else None
    if sub not in EDGEPILOT_MODEL_COMMANDS:
        return facts
    positional: list[str] = []
    _parse_flags(args[1:], facts, positional)
    if positional:
        facts.model = positional[0]
    elif sub in {"run", "serve"}:
        facts.model_is_default = True
    return facts


def with_context(argv: list[str], n_ctx: int) -> list[str]:
    """The same command with its context flag set to n_ctx (added when it had none)."""
    out: list[str] = []
    i, replaced = 0, False
    while i < len(argv):
        flag, inline = _split(argv[i])
        if i > 0 and flag in _CTX:
            out += [flag, str(n_ctx)] if inline is None else [f"{flag}={n_ctx}"]
            i += 1 if inline is not None else 2
            replaced = True
            continue
        out.append(argv[i])
        i += 1
    if not replaced and argv:
        prog = os.path.basename(argv[0])
        edgepilot = prog == "edgepilot" or argv[1:3] == ["-m", "edgepilot"]
        out += ["--ctx" if edgepilot else "-c", str(n_ctx)]
    return out


def shell_join(argv: list[str]) -> str:
    """A command line to print for pasting: each argument quoted, a name with a control character as
    bash's $'...' (shown.shell_word), so the printed line is safe and still names the file."""
    from edgepilot.shown import shell_word

    return " ".join(shell_word(a) for a in argv)


def resolve_default_model() -> str | None:
    """The bundled Gemma's path when it has been assembled already (never assemble it from here)."""
    from edgepilot.gguf.resolve import BUNDLED_NAME, cache_dir

    path = cache_dir() / "models" / BUNDLED_NAME
    return str(path) if Path(path).is_file() else None


# The memory settings a fix rewrites, in each dialect: every spelling is dropped, then the fix's values added.
_MEMORY_VALUE_FLAGS = _CTX | _UBATCH | _TYPE_K | _TYPE_V | _KV | {"-lm", "--load-mode"}
_MEMORY_SWITCHES = {"--no-mmap", "--no-repack", "--no-flash-attn", "--mmap"}


def _without_memory_flags(argv: list[str]) -> list[str]:
    out = [argv[0]] if argv else []
    i = 1
    while i < len(argv):
        flag, inline = _split(argv[i])
        if flag in _MEMORY_VALUE_FLAGS:
            i += 1 if inline is not None else 2
        elif flag in {"-fa", "--flash-attn"}:  # llama.cpp's takes on|off|auto (older: a bare switch)
            value = argv[i + 1] if inline is None and i + 1 < len(argv) else None
            i += 2 if value in {"on", "off", "auto"} else 1
        elif flag in _MEMORY_SWITCHES:
            i += 1
        else:
            out.append(argv[i])
            i += 1
    return out


def memory_flags(settings: EngineSettings, dialect: str) -> list[str]:
    """The flags that ask for these memory settings: `edgepilot` (run, chat, serve) or `llama.cpp`."""
    s = settings
    if dialect == "edgepilot":
        out = ["--ctx", str(s.n_ctx), "--ubatch", str(s.n_ubatch)]
        if s.type_k == s.type_v:
            out += ["--kv", s.type_k]
        out.append("--flash-attn" if s.flash_attn else "--no-flash-attn")
        out += [] if s.use_mmap else ["--no-mmap"]
        out += [] if s.repack else ["--no-repack"]
        return out
    out = ["-c", str(s.n_ctx), "-ub", str(s.n_ubatch), "-ctk", s.type_k, "-ctv", s.type_v]
    out += ["-fa", "on" if s.flash_attn else "off"]
    out += [] if s.use_mmap else ["-lm", "none"]
    out += [] if s.repack else ["--no-repack"]
    return out


def with_settings(argv: list[str], settings: EngineSettings) -> list[str]:
    """The same command with its memory settings (context, ubatch, KV types, flash attention, load mode,
    repacking) replaced by these."""
    facts = parse_command(argv)
    dialect = "edgepilot" if facts.tool == "edgepilot" else "llama.cpp"
    return _without_memory_flags(argv) + memory_flags(settings, dialect)


def with_model(argv: list[str], old: str, new: str) -> list[str]:
    """The same command on another model file (each argument naming the old one)."""
    return [new if a == old else a for a in argv]


def flag_value(argv: list[str], names: set[str]) -> str | None:
    """The value of the last of these flags (`-n 16`, `--n-predict=16`), None when absent."""
    found = None
    for i, arg in enumerate(argv):
        flag, inline = _split(arg)
        if flag in names:
            found = inline if inline is not None else (argv[i + 1] if i + 1 < len(argv) else None)
    return found
