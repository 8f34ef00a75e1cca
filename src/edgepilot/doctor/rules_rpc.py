"""llama.cpp's RPC backend (`--rpc HOST:PORT,...`): a helper that cannot be reached, speaks another protocol
version, or goes away mid-run. The client aborts in every case (ggml-rpc.cpp: GGML_ABORT / RPC_STATUS_ASSERT),
so the main process dies with SIGABRT and the line below names the helper, or, when it was writing to a helper
that is gone, with SIGPIPE and no line at all. And a run that works but
generates well below what `cluster plan --link` predicted for those helpers: the link is slower than
planned."""

from __future__ import annotations

import re
import signal

from edgepilot.doctor import pool_record
from edgepilot.doctor.command import shell_join
from edgepilot.doctor.evidence import Evidence
from edgepilot.doctor.types import Cause, cause
from edgepilot.shown import shell_word

CONNECT_FAIL = re.compile(r"Failed to connect to (\S+)")
VERSION = re.compile(
    r"RPC server version mismatch|RPC handshake failed for|HELLO request size mismatch", re.I
)
LOST = re.compile(r"Remote RPC server crashed or returned malformed response")
RECV = re.compile(r"recv failed \(bytes_recv=|send failed \(bytes_sent=")
EVAL_LINE = re.compile(r"(?<!prompt )eval time\s+=.*tokens per second")
RPC_DEVICE = re.compile(r"\bRPC\d*\[(\S+?:\d+)\]")  # llama.cpp names each helper's buffers RPC0[host:port]
SLOW = 0.8  # the plan's predictions are within 20 % of measured (benchmarks/link_speed.py)
HELPER_CMD = "`edgepilot rpc-server --port PORT` (or llama.cpp's `rpc-server -p PORT`)"


def _rpc_arg(ev: Evidence) -> str | None:
    cmd = ev.command or []
    for i, arg in enumerate(cmd[:-1]):
        if arg == "--rpc":
            return cmd[i + 1]
    return None


def _helpers(ev: Evidence) -> str:
    return _rpc_arg(ev) or "the --rpc helpers"


def _rpc_list(ev: Evidence) -> list[str]:
    """The helpers the run used: its --rpc, else the RPCn[host:port] buffers its log names."""
    given = _rpc_arg(ev)
    if given:
        return [p.strip() for p in given.split(",") if p.strip()]
    seen: list[str] = []
    for line in ev.lines:
        for m in RPC_DEVICE.finditer(line):
            if m.group(1) not in seen:
                seen.append(m.group(1))
    return seen


def rpc_helper_unreachable(ev: Evidence) -> list[Cause]:
    lines = ev.grep(CONNECT_FAIL, limit=2)
    if not lines:
        return []
    m = CONNECT_FAIL.search(lines[0])
    host, _, port = (m.group(1) if m else "HELPER:PORT").rpartition(":")
    port = port if port.isdigit() else "PORT"
    fix = (
        f"start the helper first: on {host or 'the helper'} run `edgepilot rpc-server --port {port}` (or "
        f"llama.cpp's `rpc-server -p {port}`) and check the port is reachable from here "
        f"(`nc -z {shell_word(host) if host else 'HELPER'} {port}`); for a helper on another device "
        f"prefer an SSH tunnel (`ssh -N -L {port}:127.0.0.1:{port} HELPER`) and --rpc 127.0.0.1:{port}"
    )
    return [cause("rpc-helper-unreachable", 95, lines, fix)]


def rpc_version_mismatch(ev: Evidence) -> list[Cause]:
    lines = ev.grep(VERSION, limit=2)
    if not lines:
        return []
    fix = (
        "run the same llama.cpp on every device: `edgepilot build` builds rpc-server and llama-server from "
        "the commit edgepilot's engine uses; rebuild the helper's rpc-server (or the main tools) with it"
    )
    return [cause("rpc-version-mismatch", 95, lines, fix)]


def rpc_helper_lost(ev: Evidence) -> list[Cause]:
    lines = ev.grep(LOST, limit=1) + ev.grep(RECV, limit=1)
    broken_pipe = ev.signal == signal.SIGPIPE and _rpc_arg(ev) is not None
    if not ev.has(LOST) and not broken_pipe:
        return []
    if not lines:
        lines = [f"{ev.status_line()} while sending to a --rpc helper: the connection to it broke"]
    fix = (
        f"restart the helper ({HELPER_CMD}) and check why it stopped (its own output; on a phone keep it in "
        f"the foreground with a wake lock); then `edgepilot cluster plan` with its real free memory: "
        f"a helper "
        f"given more layers than it holds is killed by its system"
    )
    return [cause("rpc-helper-lost", 90, [*lines, f"helpers: {_helpers(ev)}"], fix)]


def rpc_link_slow(ev: Evidence) -> list[Cause]:
    measured = ev.facts.eval_tps
    rpc = _rpc_list(ev) if measured else []
    plan = pool_record.find(rpc) if rpc else None
    if plan is None or measured is None or measured >= plan.gen_tps * SLOW:
        return []
    n = len(plan.rpc)
    extra_ms = (1 / measured - 1 / plan.gen_tps) * 1e3 / n  # per token and helper: what the link adds
    evidence = [
        *ev.grep(EVAL_LINE, limit=1)[-1:],
        f"measured {measured:.1f} t/s generation; `cluster plan --link {shell_word(plan.link)}` predicted "
        f"{plan.gen_tps:.1f} t/s for {','.join(plan.rpc)} ({measured / plan.gen_tps:.0%} of it; "
        f"single-device speed from {plan.speed_source})",
        f"each token waits ~{extra_ms:.0f} ms more per helper than over {plan.link}: the link is slower "
        "or has more latency than planned",
    ]
    latency, _, rate = plan.link.partition(",")
    # the one-way latency this link acts like: a round trip per token and helper costs twice it
    felt = f"{float(latency.removesuffix('ms') or 0) + extra_ms / 2:.0f}ms,{rate}"
    faster = [f"{name} ({tps:.1f} t/s)" for name, tps in plan.other_links.items() if tps > measured * 1.2]
    fixes = [
        f"a faster link than this one, which acts like {felt} where the plan assumed {plan.link}"
        + (f" (the plan predicts {', '.join(faster)})" if faster else "")
        + f" (check it: `ping -c 5 {shell_word(plan.rpc[0].rpartition(':')[0])}`)"
    ]
    if n > 1:
        fixes.append("fewer helpers: each one costs a round trip per token")
    if plan.alternative_command:
        alone = plan.alternative or "the main device alone"
        tps = plan.alternative_tps or 0
        fixes.append(f"{alone} ({tps:.1f} t/s predicted): `{shell_join(plan.alternative_command)}`")
    if plan.plan_command:
        fixes.append(f"plan for the link you have: `{shell_join([*plan.plan_command[:-1], felt])}`")
    return [cause("rpc-link-slow", 75, evidence, "; or ".join(fixes))]


RULES = (rpc_helper_unreachable, rpc_version_mismatch, rpc_helper_lost, rpc_link_slow)
