"""Measure a child's memory from outside it, parse llama.cpp's buffer log, run under a cgroup v1 memory limit.

Used by benchmarks/memory_accuracy.py and survival_bound.py. Linux only; the cgroup itself is the doctor's
(edgepilot.doctor.cgroup), so `edgepilot doctor --memory-limit` and these benchmarks limit memory alike.

What is measured, and why from outside:
- peak RSS = the kernel's high-water mark (`ru_maxrss` from `os.wait4`, the same counter as VmHWM). It is
  exact, unlike sampling, and what the OOM killer / Android's lmkd look at (RSS = anon + file + shmem pages).
- the anon/file split is only known by sampling /proc/PID/status (RssAnon, RssFile, RssShmem) while the child
  runs; /proc/PID/smaps_rollup and /proc/PID/smaps (per mapping: the model file vs shared libraries vs
  anonymous) are sampled less often. Sampled peaks can miss a short spike; ru_maxrss cannot.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from edgepilot.device.process import status_bytes
from edgepilot.doctor.cgroup import MemoryLimit, drop_page_cache

MIB = 1024 * 1024
KIB = 1024

# -- /proc readers -------------------------------------------------------------------------------------------

STATUS_FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "VmSize", "VmSwap")


def read_status(pid: int) -> dict[str, int]:
    """The memory lines of /proc/PID/status, in bytes ({} once the process is gone)."""
    return {k: v for k, v in status_bytes(pid).items() if k in STATUS_FIELDS}


def read_smaps_rollup(pid: int) -> dict[str, int]:
    """/proc/PID/smaps_rollup in bytes (Rss, Pss_Anon, Pss_File, Anonymous, Private_Dirty, ...)."""
    out: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return out
    for line in text.splitlines()[1:]:
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB":
            with contextlib.suppress(ValueError):
                out[key] = int(parts[0]) * KIB
    return out


_VMA_HEAD = re.compile(r"^[0-9a-f]+-[0-9a-f]+ ")


def read_smaps(
    pid: int, model_path: str | None, min_vma: int = MIB
) -> tuple[dict[str, int], dict[str, list[int]]]:
    """Resident bytes per kind of mapping, and the big anonymous mappings one by one.

    Kinds: model_file (the GGUF's mapping), model_file_anon (private CoW pages inside it), libs (*.so),
    other_file, anon (heap + anonymous mmaps). Big anonymous mappings ({start: [size, rss]}, size >= min_vma)
    are where glibc puts large allocations: llama.cpp's buffers (KV, compute, output, repack, --no-mmap
    weights) and ggml's work buffer, each its own mapping, so their resident share can be read one by one.
    """
    kinds = {"model_file": 0, "model_file_anon": 0, "libs": 0, "other_file": 0, "anon": 0}
    vmas: dict[str, list[int]] = {}
    try:
        text = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return {}, {}
    kind = "anon"
    start, size = "", 0
    real_model = os.path.realpath(model_path) if model_path else None
    for line in text.splitlines():
        if _VMA_HEAD.match(line):
            parts = line.split(None, 5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            start, size = parts[0].split("-")[0], hi - lo
            name = parts[5].strip() if len(parts) > 5 else ""
            if not name or name.startswith("["):
                kind = "anon"
            elif real_model and os.path.realpath(name) == real_model:
                kind = "model_file"
            elif ".so" in name:
                kind = "libs"
            else:
                kind = "other_file"
        elif line.startswith("Rss:"):
            rss = int(line.split()[1]) * KIB
            kinds[kind] += rss
            if kind == "anon" and size >= min_vma:
                vmas[start] = [size, rss]
        elif line.startswith("Anonymous:") and kind == "model_file":
            kinds["model_file_anon"] += int(line.split()[1]) * KIB
    return kinds, vmas


# -- running a child and watching it -------------------------------------------------------------------------


@dataclass
class ChildRun:
    argv: list[str]
    returncode: int  # negative = killed by that signal (-9: SIGKILL, what the OOM killer sends)
    wall_seconds: float
    ru_maxrss_bytes: int  # the kernel's high-water mark of RSS: the peak
    ru_minflt: int
    ru_majflt: int
    peak_status: dict[str, int] = field(default_factory=dict)  # per-field maxima over the samples
    at_peak_rss: dict[str, int] = field(default_factory=dict)  # the status sample with the largest VmRSS
    peak_smaps_rollup: dict[str, int] = field(default_factory=dict)
    peak_smaps_by_kind: dict[str, int] = field(default_factory=dict)
    # big anonymous mappings by start address: [max size, max resident], largest first. The kernel merges
    # adjacent anonymous mappings, so one entry can hold several llama.cpp buffers (KV + compute + output).
    big_anon_vmas: list[list[int]] = field(default_factory=list)
    last_vmhwm_bytes: int | None = None  # VmHWM in the last sample before exit (a cross-check of ru_maxrss)
    n_samples: int = 0
    cgroup: dict[str, Any] = field(default_factory=dict)
    stdout: str = field(default="", repr=False)
    stderr: str = field(default="", repr=False)

    @property
    def killed(self) -> bool:
        return self.returncode in (-9, 137)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("stdout")
        d.pop("stderr")
        return d


_LAUNCHER = (
    'if [ -n "$0" ]; then echo $$ > "$0" || exit 97; fi; pidfile=$1; shift; "$@" & echo $! > "$pidfile"'
)
_subreaper = False


def _become_subreaper() -> None:
    """Orphaned descendants are re-parented to this process (so it can wait4 a grandchild)."""
    global _subreaper
    if not _subreaper:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
        _subreaper = True


def _launch(
    argv: list[str], out_f: Any, err_f: Any, env: dict[str, str] | None, cgroup_dir: Path | None
) -> int:
    """Start argv as a grandchild through /bin/sh (joining cgroup_dir first); return its pid."""
    procs = str(cgroup_dir / "cgroup.procs") if cgroup_dir is not None else ""
    with tempfile.NamedTemporaryFile(prefix="memlab-pid-") as pidfile:
        sh = subprocess.Popen(
            ["/bin/sh", "-c", _LAUNCHER, procs, pidfile.name, *argv],
            stdout=out_f,
            stderr=err_f,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        rc = sh.wait()
        text = Path(pidfile.name).read_text().strip()
    if rc != 0 or not text.isdigit():
        raise RuntimeError(f"could not start {argv[0]} (launcher exit {rc}; joining {procs or 'no cgroup'})")
    return int(text)


def _max_into(acc: dict[str, int], new: dict[str, int]) -> None:
    for k, v in new.items():
        if v > acc.get(k, -1):
            acc[k] = v


def run_measured(
    argv: list[str],
    *,
    model_path: str | None = None,
    interval: float = 0.05,
    rollup_every: int = 4,
    smaps_every: int = 10,
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    cgroup_dir: Path | None = None,
    on_sample: Callable[[int], None] | None = None,
) -> ChildRun:
    """Start argv, sample its memory every `interval` s until it exits, reap it with wait4 for ru_maxrss.

    smaps_rollup is read every `rollup_every` samples and the full smaps every `smaps_every` samples.
    With `cgroup_dir`, the child starts inside that cgroup v1 and the cgroup's counters are sampled too.
    `on_sample(pid)` is called at every sample while the child lives (a caller's own probe).

    The child is forked by a /bin/sh launcher, not by this process: Linux carries a process's ru_maxrss over
    fork (the copied mm's high-water mark) and exec (setmax_mm_hiwater_rss of the old mm), so a child forked
    from this Python process would report at least this process's own peak. The launcher is tiny, exits at
    once, and this process (a child subreaper) inherits the real child and reaps it with wait4.
    """
    _become_subreaper()
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        t0 = time.perf_counter()
        pid = _launch(argv, out_f, err_f, env, cgroup_dir)
        peak_status: dict[str, int] = {}
        at_peak: dict[str, int] = {}
        peak_rollup: dict[str, int] = {}
        peak_kind: dict[str, int] = {}
        cg_peak: dict[str, int] = {}
        big_vmas: dict[str, list[int]] = {}
        last_hwm = None
        n = 0
        status = 0
        ru = None
        while True:
            wpid, status, ru = os.wait4(pid, os.WNOHANG)
            if wpid == pid:
                break
            st = read_status(pid)
            if st and on_sample is not None:
                on_sample(pid)
            if st:
                if st.get("VmRSS", 0) > at_peak.get("VmRSS", -1):
                    at_peak = st
                _max_into(peak_status, st)
                last_hwm = st.get("VmHWM", last_hwm)
                if n % rollup_every == 0:
                    _max_into(peak_rollup, read_smaps_rollup(pid))
                if n % smaps_every == 0:
                    kinds, vmas = read_smaps(pid, model_path)
                    _max_into(peak_kind, kinds)
                    for addr, (size, rss) in vmas.items():  # a growing mapping keeps its start address
                        old = big_vmas.setdefault(addr, [0, 0])
                        old[0], old[1] = max(old[0], size), max(old[1], rss)
                if cgroup_dir is not None:
                    _max_into(cg_peak, _cgroup_stat(cgroup_dir))
                n += 1
            if timeout is not None and time.perf_counter() - t0 > timeout:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)
            time.sleep(interval)
        wall = time.perf_counter() - t0
        out_f.seek(0)
        err_f.seek(0)
        stdout = out_f.read().decode("utf-8", errors="replace")
        stderr = err_f.read().decode("utf-8", errors="replace")
    assert ru is not None
    return ChildRun(
        argv=list(argv),
        returncode=os.waitstatus_to_exitcode(status),
        wall_seconds=round(wall, 3),
        ru_maxrss_bytes=ru.ru_maxrss * KIB,  # KiB on Linux
        ru_minflt=ru.ru_minflt,
        ru_majflt=ru.ru_majflt,
        peak_status=peak_status,
        at_peak_rss=at_peak,
        peak_smaps_rollup=peak_rollup,
        peak_smaps_by_kind=peak_kind,
        big_anon_vmas=sorted(big_vmas.values(), reverse=True),
        last_vmhwm_bytes=last_hwm,
        n_samples=n,
        cgroup={"peak_stat": cg_peak} if cgroup_dir is not None else {},
        stdout=stdout,
        stderr=stderr,
    )


# -- llama.cpp's log -----------------------------------------------------------------------------------------

_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_RE_MODEL_BUF = re.compile(rf"load_tensors:\s+(\S+) model buffer size =\s+{_NUM} MiB")
_RE_OUTPUT_BUF = re.compile(rf"llama_context:\s+(\S+)\s+output buffer size =\s+{_NUM} MiB")
_RE_KV_BUF = re.compile(rf"llama_kv_cache:\s+(\S+) KV buffer size =\s+{_NUM} MiB")
_RE_KV_SIZE = re.compile(
    rf"llama_kv_cache: size =\s+{_NUM} MiB \(\s*(\d+) cells,\s+(\d+) layers,\s+(\d+)/(\d+) seqs\), "
    rf"K \((\w+)\):\s+{_NUM} MiB, V \((\w+)\):\s+{_NUM} MiB"
)
_RE_ISWA = re.compile(r"llama_kv_cache_iswa: creating\s+(non-SWA|SWA) KV cache, size = (\d+) cells")
_RE_COMPUTE = re.compile(
    rf"(?:sched_reserve|graph_reserve|llama_context):\s+(\S+) compute buffer size =\s+{_NUM} MiB"
)
_RE_COMPUTE_FINAL = re.compile(rf"~llama_context:\s+(\S+) compute buffer size is\s+{_NUM} MiB")
_RE_FILE_SIZE = re.compile(rf"print_info: file size\s+=\s+{_NUM} (MiB|GiB)")
_RE_LOAD_MODE = re.compile(r"load_mode = (\w+)")
_RE_INFO = re.compile(
    r"print_info: (n_swa|n_ctx_train|n_layer|n_head_kv|n_embd_head_k|n_embd_head_v|n_vocab)\s+=\s+(\S+)"
)
_RE_CTX = re.compile(
    r"llama_context: (n_ctx|n_ctx_seq|n_batch|n_ubatch|flash_attn|n_outputs_max)\s+=\s+(\S+)"
)
_RE_GRAPH = re.compile(r"graph: nodes = (\d+), splits = (\d+)")


def mib_to_bytes(x: float) -> int:
    return round(x * MIB)


def parse_llama_log(text: str) -> dict[str, Any]:
    """Every buffer llama.cpp reports while loading a model and creating a context (sizes in MiB as logged).

    Returns model_buffers {type: MiB}, kv_caches [{kind, cells, layers, MiB, K, V, type_k, type_v, buffer}],
    kv_total, output_buffers, compute_buffers (last reservation per backend buffer type), and the sum of all:
    what llama.cpp reserves (the number `--fit` counts).
    """
    model_buffers: dict[str, float] = {}
    output_buffers: dict[str, float] = {}
    compute_buffers: dict[str, float] = {}
    compute_reservations: list[float] = []
    compute_final: dict[str, float] = {}
    kv_caches: list[dict[str, Any]] = []
    info: dict[str, str] = {}
    ctx_info: dict[str, str] = {}
    pending_kind = "full"
    pending_buf: dict[str, float] = {}
    repacked = 0
    graph = None
    for line in text.splitlines():
        if m := _RE_MODEL_BUF.search(line):
            model_buffers[m[1]] = model_buffers.get(m[1], 0.0) + float(m[2])
        elif m := _RE_OUTPUT_BUF.search(line):
            output_buffers[m[1]] = float(m[2])
        elif m := _RE_ISWA.search(line):
            pending_kind = "swa" if m[1] == "SWA" else "non_swa"
        elif m := _RE_KV_BUF.search(line):
            pending_buf[m[1]] = float(m[2])
        elif m := _RE_KV_SIZE.search(line):
            kv_caches.append(
                {
                    "kind": pending_kind,
                    "mib": float(m[1]),
                    "cells": int(m[2]),
                    "layers": int(m[3]),
                    "type_k": m[6],
                    "k_mib": float(m[7]),
                    "type_v": m[8],
                    "v_mib": float(m[9]),
                    "buffers": pending_buf,
                }
            )
            pending_kind, pending_buf = "full", {}
        elif m := _RE_COMPUTE_FINAL.search(line):
            compute_final[m[1]] = float(m[2])
        elif m := _RE_COMPUTE.search(line):
            compute_buffers[m[1]] = float(m[2])
            compute_reservations.append(float(m[2]))
        elif m := _RE_FILE_SIZE.search(line):
            info["file_size_mib"] = str(float(m[1]) * (1024 if m[2] == "GiB" else 1))
        elif m := _RE_INFO.search(line):
            info[m[1]] = m[2]
        elif m := _RE_CTX.search(line):
            ctx_info[m[1]] = m[2]
        elif m := _RE_LOAD_MODE.search(line):
            info["load_mode"] = m[1]
        elif m := _RE_GRAPH.search(line):
            graph = {"nodes": int(m[1]), "splits": int(m[2])}
        elif line.startswith("repack: repack tensor"):
            repacked += 1
    # The destructor's line has 4 decimals: prefer it over the 2-decimal reservation line.
    for k, v in compute_final.items():
        compute_buffers[k] = v
    kv_total = sum(sum(c["buffers"].values()) or c["mib"] for c in kv_caches)
    total = (
        sum(model_buffers.values()) + kv_total + sum(output_buffers.values()) + sum(compute_buffers.values())
    )
    return {
        "model_buffers_mib": model_buffers,
        "kv_caches": kv_caches,
        "kv_total_mib": kv_total,
        "output_buffers_mib": output_buffers,
        "compute_buffers_mib": compute_buffers,
        "compute_reservations_mib": compute_reservations,
        "repacked_tensors": repacked,
        "graph": graph,
        "model_info": info,
        "context_info": ctx_info,
        "reserved_mib": total,
        "reserved_bytes": mib_to_bytes(total),
    }


# -- cgroup v1 memory limit ----------------------------------------------------------------------------------


def processes_mapping(path: str | os.PathLike[str]) -> list[int]:
    """Pids (but this one) that have `path` mapped. Mapped page-cache pages survive drop_caches and stay
    charged to the cgroup that faulted them first, so a limited child would not be charged for them."""
    target = os.path.realpath(path)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if target in entry.joinpath("maps").read_text():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _cgroup_stat(cg: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    with contextlib.suppress(OSError, ValueError):
        out["usage"] = int((cg / "memory.usage_in_bytes").read_text())
        for line in (cg / "memory.stat").read_text().splitlines():
            key, _, val = line.partition(" ")
            if key in ("rss", "cache", "mapped_file", "shmem"):
                out[key] = int(val)
    return out


def run_in_cgroup(
    argv: list[str], limit_bytes: int, *, drop_caches: bool = True, model_path: str | None = None, **kw: Any
) -> ChildRun:
    """run_measured inside a fresh memory cgroup of limit_bytes; ChildRun.cgroup holds its counters."""
    with MemoryLimit(limit_bytes) as cg:
        dropped = drop_page_cache() if drop_caches else False
        shared = processes_mapping(model_path) if model_path else []
        run = run_measured(argv, model_path=model_path, cgroup_dir=cg.path, **kw)
        run.cgroup = {
            **cg.counters(),
            **run.cgroup,
            "name": cg.path.name if cg.path else "",
            "dropped": dropped,
            "model_mapped_by": shared,
        }
    return run
