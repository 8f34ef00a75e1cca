"""Everything the rules look at, gathered once: log lines, exit status, the command, the device, the model.

Gathering never raises for what it cannot read: each gap becomes a line in `checked`, which `unknown` reports.
"""

from __future__ import annotations

import re
import signal as _signal
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from edgepilot.device import fs
from edgepilot.doctor.command import CommandFacts, parse_command, resolve_default_model
from edgepilot.doctor.logscan import LogFacts, quote, scan
from edgepilot.doctor.types import PlanCheck, RunRecord
from edgepilot.plan.requested import RequestedSettings, merged
from edgepilot.records import HeadTail
from edgepilot.untrusted import open_regular

if TYPE_CHECKING:
    from edgepilot.device.probe import Probe
    from edgepilot.gguf.gguf_validate import Validation

# What of a log is read: its start (what was loaded) and its end (how it failed). Bounded in bytes, lines
# and characters per line, so a 64 MiB log costs what a 4 MiB one does and no line is long enough to make a
# pattern slow.
LOG_HEAD_BYTES = 1 << 20
LOG_TAIL_BYTES = 3 << 20
LOG_HEAD_LINES = 5_000
LOG_TAIL_LINES = 20_000
LOG_LINE_CHARS = 4096
MAX_LOG_BYTES = LOG_HEAD_BYTES + LOG_TAIL_BYTES
UNKNOWN_DEVICE = "a saved log may come from another device (--root DIR: its snapshot, --root /: this machine)"


def signal_name(sig: int | None) -> str | None:
    if sig is None:
        return None
    try:
        return _signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def split_status(code: int | None) -> tuple[int | None, int | None]:
    """(shell exit code, signal) from a shell-style code (137 = 128 + SIGKILL) or a negative returncode."""
    if code is None:
        return None, None
    if code < 0:
        return 128 - code, -code
    if 128 < code <= 128 + 64:
        return code, code - 128
    return code, None


@dataclass
class Evidence:
    lines: list[str] = field(default_factory=list)
    exit_code: int | None = None
    signal: int | None = None
    command: list[str] | None = None
    cmd: CommandFacts | None = None
    model: str | None = None  # the model path as given (on the device when --root is a tree)
    model_local: Path | None = None  # where this machine can read it, when it can
    requested: RequestedSettings = field(default_factory=RequestedSettings)  # what the failed run asked for
    probe: Probe | None = None
    root: Path | None = None
    validation: Validation | None = None
    run: RunRecord | None = None
    budget_bytes: int | None = None  # the memory the command really had (a --memory-limit), if known
    checked: list[str] = field(default_factory=list)
    facts: LogFacts = field(default_factory=LogFacts)

    # -- the log ------------------------------------------------------------------------------------------
    def grep(self, pattern: str | re.Pattern[str], limit: int = 3) -> list[str]:
        rx = re.compile(pattern, re.I) if isinstance(pattern, str) else pattern
        out: list[str] = []
        for line in self.lines:
            if rx.search(line):
                q = quote(line)
                if q and q not in out:
                    out.append(q)
                    if len(out) >= limit:
                        break
        return out

    def has(self, pattern: str | re.Pattern[str]) -> bool:
        return bool(self.grep(pattern, limit=1))

    # -- the exit status ----------------------------------------------------------------------------------
    def status_line(self) -> str | None:
        if self.signal is not None:
            return f"exit status {self.exit_code} = killed by {signal_name(self.signal)} ({self.signal})"
        if self.exit_code is not None:
            return f"exit status {self.exit_code}"
        return None

    @property
    def killed(self) -> bool:
        return self.signal == _signal.SIGKILL

    # -- the device ---------------------------------------------------------------------------------------
    @property
    def elsewhere(self) -> bool:
        """The failure happened on a device not probed here: a saved log without --root (and no run here)."""
        return self.root is None and self.run is None

    @property
    def android(self) -> bool:
        return self.probe is not None and self.probe.android is not None

    # -- the memory plan (computed on first use: only memory rules need it) ------------------------------
    @cached_property
    def plan(self) -> PlanCheck | None:
        from edgepilot.doctor.plan_check import check_plan, refused_budget

        # without a budget of its own (given, or the one a refusal names), this machine's would judge it
        if self.elsewhere and self.budget_bytes is None and refused_budget(self.lines) is None:
            self.checked.append(f"memory plan: skipped (no budget: {UNKNOWN_DEVICE})")
            return None
        return check_plan(
            self.model_local,
            self.validation is None or self.validation.ok,
            self.requested,
            self.budget_bytes,
            self.root,
            self.run is not None and bool(self.run.memory_limit_bytes),
            self.checked,
            lines=self.lines,
            program=self.cmd is not None and self.cmd.tool == "llama.cpp",
        )


def log_keeper() -> HeadTail:
    """Collects a log (a file, stdin, a command's output) as the diagnosis reads it."""
    return HeadTail(LOG_HEAD_BYTES, LOG_TAIL_BYTES)


def log_lines(kept: HeadTail) -> list[str]:
    return kept.lines(LOG_HEAD_LINES, LOG_TAIL_LINES, LOG_LINE_CHARS)


def read_log_stream(f: BinaryIO) -> list[str]:
    """The lines of a log in an open binary stream (a pipe is read to its end, keeping head and tail)."""
    return log_lines(log_keeper().read_from(f))


def read_log(path: Path | str) -> list[str]:
    """The log's lines. Raises OSError (the CLI turns it into one line) when the file cannot be read."""
    with open_regular(Path(path)) as f:  # a FIFO or device would block or never end
        return read_log_stream(f)


def gather(
    lines: list[str] | None = None,
    exit_code: int | None = None,
    command: list[str] | None = None,
    model: str | None = None,
    root: Path | str | None = fs.LIVE_ROOT,
    run: RunRecord | None = None,
    requested: RequestedSettings | None = None,
    budget_bytes: int | None = None,
) -> Evidence:
    """Collect the evidence. root=None skips the device probe (a log from another device, or tests)."""
    ev = Evidence(lines=list(lines or []), command=command, run=run, budget_bytes=budget_bytes)
    ev.facts = scan(ev.lines)
    ev.checked.append(f"log: {len(ev.lines)} lines" if lines is not None else "log: none given")
    code = run.returncode if run is not None else exit_code
    ev.exit_code, ev.signal = split_status(code)
    ev.checked.append(ev.status_line() or "exit status: unknown")

    if command:
        ev.cmd = parse_command(command)
    # what the log says was used fills in; the command line and the caller's request win
    ev.requested = merged(_log_settings(ev), ev.cmd.settings if ev.cmd else None, requested)

    ev.root = Path(root) if root is not None else None
    _probe(ev)
    _model(ev, model)
    return ev


def _log_settings(ev: Evidence) -> RequestedSettings:
    return RequestedSettings(n_ctx=ev.facts.n_ctx, n_threads=ev.facts.n_threads)


def _probe(ev: Evidence) -> None:
    if ev.root is None:
        ev.checked.append("device: not probed" + (f": {UNKNOWN_DEVICE}" if ev.run is None else ""))
        return
    from edgepilot.device.probe import probe
    from edgepilot.errors import UserError

    try:
        ev.probe = probe(ev.root)
    except UserError:
        raise
    except Exception as exc:  # a probe bug must not hide the diagnosis
        ev.checked.append(f"device: probe failed ({type(exc).__name__}: {exc})")
        return
    where = "this machine" if fs.is_live(ev.root) else str(ev.root)
    ev.checked.append(f"device: probed {where}")


def _model(ev: Evidence, given: str | None) -> None:
    model = given
    if model is None and ev.cmd is not None:
        model = ev.cmd.model or (resolve_default_model() if ev.cmd.model_is_default else None)
    if model is None and ev.facts.model_paths:
        model = ev.facts.model_paths[0]
    ev.model = model
    if model is None:
        ev.checked.append("model: none named")
        return
    ev.model_local = _local_model(ev.root, model, explicit=given is not None)
    if ev.model_local is None:
        ev.checked.append(f"model: {model} is not readable here (not validated)")
        return
    from edgepilot.gguf.verdict import validate_model

    try:
        ev.validation = validate_model(ev.model_local, sidecar=False)
    except Exception as exc:  # UserError for an unreadable file, or a parser bug: either way, say so
        ev.checked.append(f"model: {model} could not be validated ({exc})")
        return
    ev.checked.append(f"model: {model} validated ({'ok' if ev.validation.ok else 'problems found'})")


def _local_model(root: Path | None, model: str, explicit: bool) -> Path | None:
    candidates: list[Path] = []
    if root is not None and not fs.is_live(root) and Path(model).is_absolute():
        inside = fs.confined(root, model)  # a path named by the log must not lead out of the tree
        if inside is not None:
            candidates.append(inside)
    if root is None or fs.is_live(root) or explicit:
        candidates.append(Path(model).expanduser())
    for c in candidates:
        try:
            if c.is_file():
                return c
        except OSError:
            continue
    return None
