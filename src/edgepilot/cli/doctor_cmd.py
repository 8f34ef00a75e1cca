"""`edgepilot doctor`: thin CLI over edgepilot.doctor (diagnose a saved log, or run a command and watch)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from edgepilot.cli.app import app, emit, err_console, user_errors
from edgepilot.cli.format import mib
from edgepilot.errors import UserError

if TYPE_CHECKING:
    from rich.console import Console

    from edgepilot.doctor.types import Diagnosis
    from edgepilot.plan.requested import RequestedSettings

DETAILED = 3  # causes shown with evidence and fix; the rest get one line


def _read_log(log: str) -> list[str]:
    from edgepilot.doctor.evidence import read_log, read_log_stream
    from edgepilot.untrusted import failure

    if log == "-":
        return read_log_stream(sys.stdin.buffer)
    try:
        return read_log(Path(log).expanduser())
    except OSError as exc:
        raise failure(exc, "log file", log) from None


def _check_model(model: str | None, root: Path | None) -> None:
    from edgepilot.device import fs

    here = root is None or fs.is_live(root)  # no device: the model named is a file on this machine
    if model is not None and here and not Path(model).expanduser().exists():
        raise UserError(f"model file not found: {model}")


def _device_of(root: Path | None, command: list[str], log: str | None) -> Path | None:
    """The device the failure happened on. A saved log without --root may come from another device (a phone's
    logcat), whose memory, CPU and mounts this machine's would only misstate: None, no probe; `--root /` says
    it is this machine. A command run here, an exit status or a model alone: this machine."""
    if root is not None:
        return root
    return None if log is not None and not command else Path("/")


def render_diagnosis(d: Diagnosis, out: Console) -> None:
    from rich.text import Text

    from edgepilot.cli.narrow import print_command, say
    from edgepilot.engine.child_env import shown_keep_out
    from edgepilot.shown import shell_word, shown

    run = d.run
    if run is not None:
        how = f"killed by {run.signal_name}" if run.signal else f"exit status {run.exit_code}"
        limit = f" of a {mib(run.memory_limit_bytes)} limit" if run.memory_limit_bytes else ""
        command = " ".join(map(shell_word, run.command[:3])) + (" …" if len(run.command) > 3 else "")
        figures = f"{how} after {run.wall_seconds:.1f} s · peak RSS {mib(run.peak_rss_bytes)}{limit}"
        say(out, Text.assemble(("doctor:", "bold"), f" {command}: {figures}"))  # a path stays whole
    for i, c in enumerate(d.causes, 1):
        say(out, Text.assemble(f"{i}. ", (c.id, "bold"), f" — {shown(c.title)}"))
        if i > DETAILED:
            continue
        label = "checked" if c.id == "unknown" else "evidence"
        for line in c.evidence:
            say(out, f"   {label}: {line}")
        say(out, f"   fix: {_fix_text(c.fix, c.fix_commands)}", style="bold")
        for n, argv in enumerate(c.fix_commands, 1):  # whole words, wrapped with ` \`: still pasteable
            # a CPU run of llama.cpp keeps the GPU drivers out, as edgepilot's own runs do
            shown_argv = [*shown_keep_out(argv), *argv]
            print_command(out, f"   {n}." if len(c.fix_commands) > 1 else "   run:", shown_argv, style="bold")


def _fix_text(fix: str, commands: list[list[str]]) -> str:
    """The fix with the commands it proposes (printed whole below it) named by their place."""
    from edgepilot.doctor.command import shell_join

    for n, argv in enumerate(commands, 1):
        where = f"command {n} below" if len(commands) > 1 else "the command below"
        fix = fix.replace(f"`{shell_join(argv)}`", where)
    return fix


def report_engine_failure(
    exc: Exception, model: str | None, requested: RequestedSettings | None
) -> click.exceptions.Exit:
    """For `run`/`serve`: print the engine's error, then the doctor's top cause and fix; exit code 2."""
    from edgepilot.doctor.command import resolve_default_model
    from edgepilot.doctor.diagnose import diagnose
    from edgepilot.shown import shown

    err = err_console()

    err.print(f"edgepilot: error: {shown(exc)}", markup=False, soft_wrap=True)
    try:
        lines = [str(exc), *getattr(exc, "log", [])]
        if "llama_cpp" in sys.modules:  # the in-process engine ran: its captured log
            from edgepilot.engine import llama_log

            lines += llama_log.lines_since(0)
        d = diagnose(
            lines,
            exit_code=getattr(exc, "exit_code", None),
            model=model or resolve_default_model(),
            requested=requested,
        )
    except Exception as doc_exc:  # the doctor must never hide the original error
        err.print(f"edgepilot: doctor could not diagnose this ({shown(doc_exc)})", markup=False, style="dim")
        return click.exceptions.Exit(2)
    top = d.top
    err.print(f"edgepilot: doctor: {top.id} — {shown(top.title)}", markup=False, soft_wrap=True)
    for line in top.evidence[:3]:
        err.print(f"  evidence: {shown(line)}", markup=False, soft_wrap=True, style="dim")
    err.print(f"  fix: {shown(top.fix)}", markup=False, soft_wrap=True)
    return click.exceptions.Exit(2)


def _exit_status(text: str | None) -> int | None:
    """--exit-code as a shell reports it: a number (0-255), or a signal name (SIGSEGV -> 139)."""
    if text is None:
        return None
    value = text.strip()
    if value.isascii() and value.isdigit() and int(value) <= 255:
        return int(value)
    import signal

    name = value.upper()
    name = name if name.startswith("SIG") else "SIG" + name
    try:
        return 128 + int(signal.Signals[name])
    except KeyError:
        raise UserError(f"--exit-code {text!r}: give a status 0-255 (137) or a signal (SIGKILL)") from None


@app.command(context_settings={"allow_interspersed_args": False})
@click.argument(
    "command", nargs=-1, metavar="[-- CMD ARGS...]", help="Run this command and diagnose how it ends"
)
@click.option(
    "--log",
    help="Diagnose a saved log (llama.cpp output, logcat, dmesg, gdb, pip); - = stdin",
    metavar="FILE",
)
@click.option(
    "--exit-code",
    metavar="N|SIGNAME",
    help="The exit status the failed command had: 137, 139, or a signal (SIGKILL, SIGSEGV)",
)
@click.option("--model", help="The model that was loaded (validated and planned)", metavar="MODEL")
@click.option(
    "--root",
    type=click.Path(path_type=Path),
    help="The device it failed on: a device tree, a snapshot, or / for this machine (default: this machine; "
    "for a saved log, none: it may come from another device)",
    metavar="DIR",
)
@click.option(
    "--memory-limit",
    help="Run the command under this memory limit (cgroup v1, root), e.g. 300MiB",
    metavar="SIZE",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object (the command's output goes to stderr)"
)
@user_errors
def doctor(
    command: tuple[str, ...],
    log: str | None,
    exit_code: str | None,
    model: str | None,
    root: Path | None,
    memory_limit: str | None,
    as_json: bool,
) -> None:
    """Say why a run failed: from a saved log, or by running the command (`doctor -- CMD ARGS...`)."""
    from edgepilot.cli.flags import size_or_none
    from edgepilot.doctor.diagnose import diagnose

    command = list(command)
    if command and log is not None:
        raise UserError("give either --log FILE or a command after --, not both")
    if memory_limit is not None and not command:
        raise UserError(
            "--memory-limit needs a command to run: edgepilot doctor --memory-limit 300MiB -- CMD"
        )
    status = _exit_status(exit_code)
    if command and exit_code is not None:
        raise UserError("--exit-code is for --log; a command run under the doctor reports its own")
    if not command and log is None and status is None and model is None:
        raise UserError(
            "nothing to diagnose: give --log FILE (- for stdin), --exit-code N, --model FILE, "
            "or a command to run after --, e.g. `edgepilot doctor -- llama-cli -m model.gguf`"
        )
    limit = size_or_none(memory_limit, "--memory-limit")
    root = _device_of(root, command, log)
    _check_model(model, root)
    if not command:
        lines = _read_log(log) if log is not None else None
        if model is not None and root == Path("/"):
            from edgepilot.cli.doctor_history import history_lines

            lines = (lines or []) + history_lines(model)
        emit(diagnose(lines, exit_code=status, model=model, root=root), as_json, render_diagnosis)
        return

    from edgepilot.doctor.supervise import Progress, supervise

    sink_out = sys.stderr.buffer if as_json else sys.stdout.buffer

    def show(progress: Progress) -> None:
        sys.stderr.write(progress.line() + "\n")
        sys.stderr.flush()

    ran = supervise(command, memory_limit=limit, stdout=sink_out, stderr=sys.stderr.buffer, progress=show)
    d = diagnose(ran.lines, command=command, model=model, root=root, run=ran.record, budget_bytes=limit)
    if not as_json:
        err_console().print()
    emit(d, as_json, render_diagnosis)
    raise click.exceptions.Exit(ran.record.exit_code)
