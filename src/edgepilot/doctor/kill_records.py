"""Whose process a kill record is about: lmkd, am_kill and the Linux OOM killer name their victim.

A phone's logcat around a failure is full of lmkd killing other apps: memory was short on the device, but
those lines are not this run being killed. The doctor says whose process each record is about, and weighs
a log that shows only other apps killed as memory pressure, not as this run's kill.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from edgepilot.doctor.evidence import Evidence
from edgepilot.doctor.logscan import quote
from edgepilot.doctor.rulekit import KILLER_LINE

# lmkd (and the old in-kernel lowmemorykiller): Kill 'NAME' (PID), uid U, oom_score_adj A to free N kB rss
_LMKD = re.compile(
    r"\bKill(?:ing)? '(?P<name>[^']{1,128})' \((?P<pid>\d{1,10})\)"
    r"(?:[^;]*?\b(?:oom_score_adj|adj) (?P<adj>-?\d+))?(?:[^;]*?\bto free (?P<kib>\d+) ?kB)?"
)
# the Linux OOM killer: Out of memory: Killed process PID (NAME) ... anon-rss:NkB ... oom_score_adj:A
_OOM = re.compile(
    r"Kill(?:ed)? process (?P<pid>\d{1,10}) \((?P<name>[^)]{1,64})\)"
    r"(?:.*?\banon-rss:(?P<kib>\d+)kB)?(?:.*?\boom_score_adj:(?P<adj>-?\d+))?"
)
_OOM_TASK = re.compile(r"\btask=(?P<name>[^,]{1,64}),pid=(?P<pid>\d{1,10})")
# the event log: am_kill : [user,pid,name,adj,reason]
_AM_KILL = re.compile(
    r"am_kill[ :]{0,4}\[\d{1,10},(?P<pid>\d{1,10}),(?P<name>[^,\]]{1,128}),(?P<adj>-?\d{1,6})"
)
_LMKD_REASON = re.compile(r"reason: ([^(;]+)")
# Processes that run models: a victim named so is taken for the run (Termux hosts what its shell runs).
_PATTERNS = (("lmkd", _LMKD), ("the OOM killer", _OOM), ("the OOM killer", _OOM_TASK), ("am_kill", _AM_KILL))
RUNNER = re.compile(
    r"llama|\bllm|llm_|gguf|ggml|python|edgepilot|termux|ollama|executorch|mlc|mnn|rkllm|whisper|"
    r"pocketpal|chatterui|koboldcpp|gpt4all",
    re.I,
)


@dataclass
class KillRecord:
    killer: str  # "lmkd", "am_kill" or "the OOM killer"
    victim: str
    pid: int
    adj: int | None  # oom_score_adj: 0 foreground, 900+ cached
    rss_kib: int | None
    line: str  # the log line, quoted from the killer's words on
    ours: bool | None  # the run's process; None when nothing ties it either way
    reason: str | None = None  # lmkd's own words on why ("low watermark is breached and swap is low")

    def described(self) -> str:
        if self.ours:
            whose = "this run's process"
        elif self.ours is False:
            whose = f"{'another app' if self.killer != 'the OOM killer' else 'another process'}, not this run"
        else:
            whose = "a process this log does not tie to the run"
        return f"{whose}: {self.line}"


def _program_names(ev: Evidence) -> set[str]:
    """The names the run's process can have: its program (15 characters in the kernel's comm) and, for an
    edgepilot or Python command, the interpreter."""
    if not ev.command:
        return set()
    prog = os.path.basename(ev.command[0])
    names = {prog, prog[:15]}
    if prog.startswith(("edgepilot", "python")):
        names |= {"python", "python3", "edgepilot"}
    return names


def _ours(ev: Evidence, killer: str, name: str) -> bool | None:
    base = os.path.basename(name.strip())
    if base in _program_names(ev) or RUNNER.search(base):
        return True
    if killer != "the OOM killer" or ev.command:
        return False  # an Android app named otherwise, or not the program that was run
    return None  # the OOM killer named a process and nothing says what ran


def _record(ev: Evidence, raw: str) -> KillRecord | None:
    for killer, rx in _PATTERNS:
        m = rx.search(raw)
        if m is None:
            continue
        groups = m.groupdict()
        start = KILLER_LINE.search(raw)  # from the killer's words to lmkd's reason (said once, in summary)
        text = " ".join(raw[start.start() if start else 0 :].split(" reason: ")[0].split()).rstrip(";")
        return KillRecord(
            killer=killer,
            victim=groups["name"],
            pid=int(groups["pid"]),
            adj=int(groups["adj"]) if groups.get("adj") else None,
            rss_kib=int(groups["kib"]) if groups.get("kib") else None,
            line=quote(text),
            ours=_ours(ev, killer, groups["name"]),
            reason=reason.group(1).strip() if (reason := _LMKD_REASON.search(raw)) else None,
        )
    return None


def kill_records(ev: Evidence, limit: int = 20) -> list[KillRecord]:
    out: list[KillRecord] = []
    for raw in ev.lines:
        if KILLER_LINE.search(raw) and (r := _record(ev, raw)) is not None:
            out.append(r)
            if len(out) >= limit:
                break
    return out


def killer_evidence(ev: Evidence, limit: int = 3) -> list[str]:
    """The killer's lines, each saying whose process it is about (lines naming no victim are quoted)."""
    out: list[str] = []
    for raw in ev.lines:
        if not KILLER_LINE.search(raw):
            continue
        r = _record(ev, raw)
        line = r.described() if r is not None else quote(raw)
        if line and line not in out:
            out.append(line)
            if len(out) >= limit:
                break
    return out


def pressure_only(ev: Evidence) -> str | None:
    """When every kill in the log is of another app: one line saying so (how many, what they freed, lmkd's
    reason), else None. Such a log shows the device short of memory, not this run killed."""
    records = kill_records(ev)
    if not records or any(r.ours is not False for r in records):
        return None
    apps = {r.victim for r in records}
    freed = sum(r.rss_kib or 0 for r in records)
    what = f"{len(apps)} other app{'s' if len(apps) != 1 else ''}"
    line = f"{records[0].killer} killed {what}" + (f" ({freed / 1024:.0f} MiB rss)" if freed else "")
    reason = next((r.reason for r in records if r.reason), None)
    if reason:
        line += f" because {reason}"
    return line + ": the device was short of memory; no line shows this run killed"
