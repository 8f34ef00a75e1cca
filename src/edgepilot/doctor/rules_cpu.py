"""CPU causes: an illegal instruction, too many threads on a big.LITTLE CPU, thermal throttling."""

from __future__ import annotations

import re
import signal

from edgepilot.doctor.evidence import Evidence
from edgepilot.doctor.sigill_fix import ALL_VARIANTS, sigill_fix
from edgepilot.doctor.types import Cause, cause
from edgepilot.words import count

SIGILL_LINE = re.compile(
    r"Illegal instruction|\bSIGILL\b|signal 4\b|ILL_ILLOPC|ILL_ILLTRP|illegal hardware instruction|"
    r"invalid opcode",
    re.I,
)
BUILD_FLAGS = re.compile(r"-march=\S+|\+(i8mm|sve2?|dotprod|bf16)\b|GGML_NATIVE|armv8\.[2-9]-?a|armv9", re.I)
THREADS_WORDS = re.compile(r"too many (cores|threads)|more threads.{0,20}slower", re.I)
THERMAL_LINE = re.compile(
    r"temperature above threshold|cpu clock throttled|thermal.{0,40}throttl|throttl.{0,40}thermal|"
    r"Critical temperature reached|thermal-engine",
    re.I,
)
RPI_THROTTLED = re.compile(r"throttled=(0x[0-9a-f]+)", re.I)
# vcgencmd get_throttled bits: 1 frequency capped, 2 throttled, 3 soft temperature limit (17-19: since boot).
_RPI_THERMAL_BITS = (1, 2, 3, 17, 18, 19)


def illegal_instruction(ev: Evidence) -> list[Cause]:
    lines = ev.grep(SIGILL_LINE)
    by_signal = ev.signal == signal.SIGILL
    if not lines and not by_signal:
        return []
    evidence = ([ev.status_line() or ""] if by_signal else []) + lines
    evidence += ev.grep(BUILD_FLAGS, limit=2)
    cpu = ev.probe.cpu if ev.probe is not None else None
    if cpu is not None:
        if cpu.missing:
            evidence.append("this CPU lacks: " + "; ".join(cpu.missing))
        if cpu.simd:
            evidence.append(f"this CPU has: {', '.join(cpu.simd)}")
    found = sigill_fix(ev)
    evidence += found.evidence
    fix = f"the build uses instructions this CPU does not run; {found.fix}"
    if ALL_VARIANTS not in fix:
        fix += (
            f"; or build once for every CPU with `cmake -B build {ALL_VARIANTS}` (picks kernels at run "
            "time); drop -march flags above the CPU's, such as armv8.7a (llama.cpp #12393)"
        )
    return [cause("illegal-instruction", 92 if lines else 85, evidence, fix, fix_commands=found.commands)]


def _fast_cluster(ev: Evidence) -> tuple[list[int], int] | None:
    """(CPUs of the fastest cluster group worth using, how many threads) from the probe."""
    cpu = ev.probe.cpu if ev.probe is not None else None
    if cpu is None or len(cpu.clusters) < 2:
        return None
    fast = [c for c in cpu.clusters if c.kind in ("prime", "performance")] or cpu.clusters[:1]
    cpus = sorted(n for c in fast for n in c.cpus)
    return (cpus, len(cpus)) if cpus else None


def _cpu_list(cpus: list[int]) -> str:
    if cpus and cpus == list(range(cpus[0], cpus[-1] + 1)):
        return f"{cpus[0]}-{cpus[-1]}" if len(cpus) > 1 else str(cpus[0])
    return ",".join(map(str, cpus))


def too_many_threads(ev: Evidence) -> list[Cause]:
    evidence: list[str] = []
    score = 0
    best_threads = None
    rows = ev.facts.bench
    for test in dict.fromkeys(r.test for r in rows):
        by_threads = sorted((r for r in rows if r.test == test), key=lambda r: r.threads)
        best = max(by_threads, key=lambda r: r.tps)
        worse = [r for r in by_threads if r.threads > best.threads and r.tps < 0.9 * best.tps]
        if worse:
            w = worse[-1]
            evidence.append(
                f"llama-bench {test}: {best.tps:g} t/s with {count(best.threads, 'thread')}, "
                f"{w.tps:g} with {w.threads}"
            )
            best_threads = best.threads
            score = 88
    words = ev.grep(THREADS_WORDS, limit=1)
    if words:
        evidence += words
        score = max(score, 70)
    f = ev.facts
    fast = _fast_cluster(ev)
    all_cores = (
        f.n_threads is not None and f.n_threads_available is not None and f.n_threads >= f.n_threads_available
    )
    if all_cores:
        evidence += ev.grep(r"n_threads\s*=", limit=1)
        score = max(score, 60 if fast else 35)
    n_threads = ev.requested.n_threads or f.n_threads
    if fast and n_threads and n_threads > fast[1] and not all_cores:
        evidence.append(f"{count(n_threads, 'thread')} requested on a CPU with {count(fast[1], 'fast core')}")
        score = max(score, 45)
    if not score:
        return []
    if fast:
        evidence.append(f"fast cores: CPU {_cpu_list(fast[0])}")
        cpus, n = fast
        n = best_threads or n
        fix = (
            f"run on the fast cores only: `taskset -c {_cpu_list(cpus)} <command> -t {n}` "
            f"(edgepilot run: --threads {n})"
        )
    else:
        n = best_threads or max(1, (n_threads or 8) // 2)
        fix = (
            f"use fewer threads (-t {n}, edgepilot run --threads {n}) and pin them to the big cores with "
            "`taskset -c <big cpus>`; `llama-bench -t 2,4,8` or `edgepilot bench MODEL` shows the best count"
        )
    return [cause("too-many-threads", score, evidence, fix)]


def _rpi_thermal(ev: Evidence) -> list[str]:
    out = []
    for line in ev.grep(RPI_THROTTLED, limit=3):
        m = RPI_THROTTLED.search(line)
        if m and any(int(m.group(1), 16) >> b & 1 for b in _RPI_THERMAL_BITS):
            out.append(line)
    return out


def thermal_throttling(ev: Evidence) -> list[Cause]:
    evidence = ev.grep(THERMAL_LINE) + _rpi_thermal(ev)
    score = 85 if evidence else 0
    run = ev.run
    if run is not None and run.after.hottest_celsius is not None:
        before, after = run.before.hottest_celsius, run.after.hottest_celsius
        if after >= 80 or (before is not None and after - before >= 15):
            evidence.append(f"{run.after.hottest_zone}: {before} °C before the run, {after} °C after")
            score = max(score, 60)
    probe = ev.probe
    if probe is not None:
        hot = probe.hottest
        if hot is not None and hot.celsius is not None and hot.celsius >= 75:
            evidence.append(f"{hot.zone} ({hot.type}) at {hot.celsius} °C")
            score = max(score, 50)
        capped = [
            c for c in probe.cpu.clusters if c.scaling_max_mhz and c.max_mhz and c.scaling_max_mhz < c.max_mhz
        ]
        for c in capped:
            evidence.append(f"CPU {_cpu_list(c.cpus)} capped at {c.scaling_max_mhz} of {c.max_mhz} MHz")
        if capped:
            score = max(score, 30) + (5 if score else 0)
    if not score:
        return []
    fix = (
        "let the device cool (check `cat /sys/class/thermal/thermal_zone*/temp`; a Raspberry Pi: "
        "`vcgencmd get_throttled`), take it out of its case or add a fan/heatsink, do not charge while "
        "running, and use fewer threads (-t 2 to 4) so it heats less; compare speeds only on a cool device"
    )
    return [cause("thermal-throttling", score, evidence, fix)]


RULES = (illegal_instruction, too_many_threads, thermal_throttling)
