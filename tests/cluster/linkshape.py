"""The kernel's own link shaping, where it has it: `tc qdisc ... netem delay D rate R` on loopback.

Optional: the relay (relay.py) is the default and works on every kernel. netem shapes every loopback packet,
and the relay's path crosses loopback twice each way (main -> relay -> helper), so each hop gets half the
one-way latency. Kernels without netem (or without the right to change qdiscs) refuse; `netem` then raises
NetemUnavailable with tc's own words, which callers print or skip on.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from edgepilot.cluster.link import Link

DEVICE = "lo"


class NetemUnavailable(RuntimeError):
    pass


def _tc(*args: str) -> subprocess.CompletedProcess[str]:
    tc = shutil.which("tc")
    if tc is None:
        raise NetemUnavailable("no `tc` on this machine (iproute2)")
    return subprocess.run([tc, *args], capture_output=True, text=True, timeout=10)


@contextmanager
def netem(link: Link) -> Iterator[None]:
    delay_ms = link.latency_s * 1e3 / 2
    rate = f"{link.rate_bits / 1e3:.0f}kbit"
    done = _tc("qdisc", "add", "dev", DEVICE, "root", "netem", "delay", f"{delay_ms:g}ms", "rate", rate)
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        raise NetemUnavailable(
            f"tc refused netem on {DEVICE} ({why[0] if why else f'exit {done.returncode}'}); "
            "use the relay (the default)"
        )
    try:
        yield
    finally:
        _tc("qdisc", "del", "dev", DEVICE, "root")
