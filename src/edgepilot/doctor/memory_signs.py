"""Was memory short when the process died? The signs that it was, and the evidence that it was not.

lmkd and the OOM killer send SIGKILL, but so do `kill -9`, a supervisor's timeout and a CI job's limit. A
kill is a memory kill when something says so (a killer's record, a cgroup OOM counter, memory pressure, a
peak at the limit, a plan that does not fit). When the process's peak is known and was far below everything
it could have used, and none of those signs is there, memory is ruled out: the kill came from outside.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgepilot.doctor.evidence import Evidence
from edgepilot.doctor.kill_records import killer_evidence
from edgepilot.doctor.rulekit import ALLOC_FAIL, mib

FAR_BELOW = 0.5  # a peak at most this share of the memory the process could have had is far below it
NEAR_LIMIT = 0.85  # a peak at least this share of a hard limit is at the limit
PSI_SEEN = 5.0  # PSI memory "some" avg10 (%) from which the system was visibly reclaiming


@dataclass
class MemorySigns:
    seen: list[str] = field(default_factory=list)  # signs that memory was short
    absent: list[str] = field(default_factory=list)  # what shows it was not (empty: unknown)

    @property
    def ruled_out(self) -> bool:
        return not self.seen and bool(self.absent)


def _pressure(ev: Evidence) -> tuple[list[str], list[str]]:
    run = ev.run
    if run is None:
        return [], []
    psi = [p for p in (run.before.psi_some_avg10, run.after.psi_some_avg10) if p is not None]
    if not psi:
        return [], []
    before, after = run.before.psi_some_avg10, run.after.psi_some_avg10
    line = f"memory pressure (PSI some avg10) {before} before, {after} after"  # as rules_memory says it
    return ([line], []) if max(psi) >= PSI_SEEN else ([], [line])


def _cgroup(ev: Evidence) -> tuple[list[str], list[str]]:
    run = ev.run
    if run is None or not run.cgroup:
        return [], []
    c = run.cgroup
    limit = c.get("limit_bytes") or run.memory_limit_bytes
    seen = []
    if c.get("oom_kill") or c.get("under_oom"):
        seen.append(f"cgroup OOM: oom_kill={c.get('oom_kill')}, under_oom={c.get('under_oom')}")
    if c.get("failcnt"):
        seen.append(f"cgroup: {c['failcnt']} allocations hit the {mib(limit)} limit (failcnt)")
    if limit and (c.get("max_usage_bytes") or 0) >= NEAR_LIMIT * limit:
        seen.append(f"cgroup: usage reached {mib(c['max_usage_bytes'])} of its {mib(limit)} limit")
    return seen, [] if seen else [
        f"cgroup: no OOM kill (oom_kill={c.get('oom_kill', 0)}) and no failed charge"
    ]


def _peak(ev: Evidence) -> tuple[list[str], list[str]]:
    """The peak against the smallest of what the process could have had: a hard limit, the free memory."""
    run = ev.run
    if run is None or not run.peak_rss_bytes:
        return [], []
    room = [
        (n, what)
        for n, what in (
            (run.memory_limit_bytes, "memory limit"),
            (run.before.available_bytes, "available when it ran"),
        )
        if n
    ]
    if not room:
        return [], []
    smallest, what = min(room)
    peak = run.peak_rss_bytes
    if run.memory_limit_bytes and peak >= NEAR_LIMIT * run.memory_limit_bytes:
        return [f"peak RSS {mib(peak)} at the {mib(run.memory_limit_bytes)} memory limit"], []
    if peak <= FAR_BELOW * smallest:
        return [], [f"peak RSS {mib(peak)}, far below the {mib(smallest)} {what}"]
    return [], []  # in between: neither a sign nor a proof


def memory_signs(ev: Evidence) -> MemorySigns:
    signs = MemorySigns()
    killers = killer_evidence(ev, limit=2)
    signs.seen += killers
    signs.seen += [ln for ln in ev.grep(ALLOC_FAIL, limit=2) if "Killed process" not in ln]
    for part in (_cgroup, _pressure):
        seen, absent = part(ev)
        signs.seen += seen
        signs.absent += absent
    seen, absent = _peak(ev)
    signs.seen += seen
    if not absent:  # without a peak far below what there was, nothing is ruled out
        signs.absent = []
        return signs
    signs.absent = absent + signs.absent
    if not killers:
        signs.absent.append("no OOM-killer or lmkd record in the output")
    if not signs.seen:
        plan = ev.plan  # computed only now: it reads the model and the device
        if plan is not None and not plan.fits:
            signs.seen.append(
                f"the memory plan does not fit: ctx {plan.n_ctx} needs ~{mib(plan.peak_rss_bytes)}"
            )
    return signs
