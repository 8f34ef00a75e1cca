"""CPU facts: userland vs CPU bitness, core clusters (fastest first), core names, ISA features, fast paths.

Clusters group CPUs by (maximum frequency, core type): a cpufreq policy can hold two core types at one clock
(Snapdragon 8 Gen 2: A715 and A710 in one 2.8 GHz policy), and llama.cpp counts all cores as equal, so knowing
which are the big ones is the point.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.device import commands, fs
from edgepilot.device.cpu_parts import core_name, core_rank
from edgepilot.device.cpuinfo import MAX_CPUS, CpuInfo, parse_cpuinfo
from edgepilot.device.isa import summarize

SYS_CPU = "sys/devices/system/cpu"
_64BIT = {"aarch64", "arm64", "aarch64_be", "x86_64", "amd64", "riscv64", "ppc64le", "ppc64", "s390x"}
_32BIT = {"armv8l", "armv7l", "armv7", "armv6l", "arm", "i686", "i586", "i386", "x86"}


@dataclass
class Cluster:
    cpus: list[int]
    max_mhz: int | None
    core: str | None
    kind: str = "uniform"  # prime / performance / efficiency / uniform / unknown (offline, no facts)
    scaling_max_mhz: int | None = None  # set when a governor or thermal cap holds the cluster below max_mhz
    capacity: int | None = None  # /sys/devices/system/cpu/cpuN/cpu_capacity (1024 = the fastest core)


@dataclass
class CpuFacts:
    arch: str | None  # `uname -m` of the userland: aarch64, armv8l, x86_64 ...
    userland_bits: int | None
    cpu_bits: int | None  # what the CPU itself can run
    cores: int
    online: list[int]
    clusters: list[Cluster]
    features: list[str]
    isa: str  # arm64 / arm32 / x86_64 / unknown: the instruction set this userland runs
    simd: list[str]
    fast_paths: list[str]
    repack: dict[str, str]
    missing: list[str]
    model_name: str | None
    hardware: str | None
    reasons: list[str] = field(default_factory=list)
    repack_rows: dict[str, int] = field(default_factory=dict)  # ggml type -> row multiple its layout needs

    def repack_plan(self) -> dict[str, tuple[str, int]]:
        """ggml type -> (layout, row multiple) that llama.cpp's CPU_REPACK uses on this CPU."""
        return {t: (layout, self.repack_rows.get(t, 1)) for t, layout in self.repack.items()}

    @property
    def big_cores(self) -> list[int]:
        """CPUs of every cluster except the efficiency one (all CPUs on a uniform machine)."""
        picked = [c for cl in self.clusters if cl.kind not in ("efficiency", "unknown") for c in cl.cpus]
        return sorted(picked) if picked else sorted(c for cl in self.clusters for c in cl.cpus)


def parse_cpu_list(text: str) -> list[int]:
    """ "0-3,6,8-9" -> [0, 1, 2, 3, 6, 8, 9]. ValueError for CPU numbers beyond any kernel's NR_CPUS."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        first = int(lo)
        last = int(hi) if dash else first
        if not 0 <= first <= last < MAX_CPUS:
            raise ValueError(f"CPU range {part[:40]!r} outside 0-{MAX_CPUS - 1}")
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def _cpu_list(root: Path, name: str) -> tuple[list[int] | None, str | None]:
    text, reason = fs.read_text(root, f"{SYS_CPU}/{name}")
    if text is None:
        return None, reason
    try:
        return parse_cpu_list(text), None
    except ValueError:
        return None, f"unparsable CPU list {text.strip()[:40]!r}: /{SYS_CPU}/{name}"


def _bits_of(machine: str | None) -> int | None:
    if not machine:
        return None
    m = machine.lower()
    if m in _64BIT:
        return 64
    if m in _32BIT or m.startswith("armv"):
        return 32
    return None


def _isa_family(machine: str | None, info: CpuInfo) -> str:
    m = (machine or "").lower()
    if m in ("aarch64", "arm64", "aarch64_be"):
        return "arm64"
    if m.startswith("arm"):
        return "arm32"
    if m in ("x86_64", "amd64"):
        return "x86_64"
    if m in ("i686", "i586", "i386", "x86"):
        return "x86"
    if not m:  # no uname: trust cpuinfo
        if info.kind == "x86":
            return "x86_64" if "lm" in info.common_features() else "x86"
        if info.kind == "arm":
            return "arm64" if "asimd" in info.common_features() else "arm32"
    return "unknown"


def _cpu_bits(info: CpuInfo, features: list[str]) -> int | None:
    if info.kind == "x86":
        return 64 if "lm" in features else 32
    if info.kind == "arm":
        arch = info.arm_architecture()
        if arch is not None:
            return 64 if arch >= 8 else 32
        return 64 if "asimd" in features else None
    return None


def read_cpu(root: Path) -> CpuFacts:
    reasons: list[str] = []
    machine, why = commands.uname_machine(root)
    if why:
        reasons.append(f"userland architecture unknown ({why})")
    text, why = fs.read_text(root, "proc/cpuinfo", fs.CPUINFO_FILE)
    info = parse_cpuinfo(text or "")
    if text is None:
        reasons.append(f"no CPU details ({why})")
    features = info.common_features()
    family = _isa_family(machine, info)
    cpuinfo_family = {"arm": ("arm64", "arm32"), "x86": ("x86_64", "x86")}.get(info.kind)
    emulated = cpuinfo_family is not None and family != "unknown" and family not in cpuinfo_family
    if emulated:
        reasons.append(
            f"/proc/cpuinfo describes a {info.kind} CPU but the userland is {machine}: emulated "
            "(qemu-user?); "
            "ISA features of the emulated CPU are unknown"
        )
    userland_bits = _bits_of(machine)
    cpu_bits = None if emulated else _cpu_bits(info, features)
    if cpu_bits == 64 and userland_bits == 32:
        reasons.append(
            f"32-bit userland ({machine}) on a 64-bit CPU: llama.cpp runs without its AArch64 kernels and a "
            "32-bit process can address at most ~3 GiB; use a 64-bit (arm64-v8a / aarch64) build of Termux "
            "or of the OS"
        )
    sve_bytes = fs.read_int(root, "proc/sys/abi/sve_default_vector_length")[0] if "sve" in features else None
    isa = summarize("unknown" if emulated else family, features, sve_bytes * 8 if sve_bytes else None)

    possible, why_possible = _cpu_list(root, "possible")
    online, why_online = _cpu_list(root, "online")
    listed = sorted({c.index for c in info.cpus})
    if possible is None:
        reasons.append(f"CPU count from /proc/cpuinfo ({why_possible})")
        possible = sorted(set(listed) | set(online or []))
    if online is None:
        online = [c for c in possible if c in listed] or list(possible)
    clusters = _clusters(root, possible, online, info, reasons)
    hardware = info.machine.get("hardware") or info.machine.get("model")
    model_name = next((c.get("model name") for c in info.cpus if c.get("model name")), None)
    if model_name is None:
        model_name = info.machine.get("processor_name")
    return CpuFacts(
        arch=machine,
        userland_bits=userland_bits,
        cpu_bits=cpu_bits,
        cores=len(possible) or len(listed),
        online=online,
        clusters=clusters,
        features=features,
        isa=isa.family,
        simd=isa.simd,
        fast_paths=isa.fast_paths,
        repack=isa.repack,
        missing=isa.missing,
        model_name=model_name,
        hardware=hardware,
        reasons=reasons,
        repack_rows=isa.repack_rows,
    )


@dataclass
class _CoreFacts:
    cpu: int
    max_khz: int | None
    scaling_khz: int | None
    capacity: int | None
    name: str | None
    rank: int


def _clusters(
    root: Path, cpus: list[int], online: list[int], info: CpuInfo, reasons: list[str]
) -> list[Cluster]:
    by_index = {c.index: c for c in info.cpus}
    facts: list[_CoreFacts] = []
    freq_failures: list[str] = []
    for cpu in cpus:
        base = f"{SYS_CPU}/cpu{cpu}"
        max_khz, why = fs.read_int(root, f"{base}/cpufreq/cpuinfo_max_freq")
        scaling, why_scaling = fs.read_int(root, f"{base}/cpufreq/scaling_max_freq")
        if max_khz is None:
            if scaling is not None:
                max_khz = scaling
            else:
                freq_failures.append(why or why_scaling or f"cpu{cpu}")
        capacity = fs.read_int(root, f"{base}/cpu_capacity")[0] if max_khz is None else None
        entry = by_index.get(cpu)
        if entry is not None and info.kind == "arm":
            name, rank = core_name(entry.implementer, entry.part), core_rank(entry.implementer, entry.part)
        elif entry is not None:
            name, rank = entry.get("model name"), 0
        else:
            name, rank = None, 0
        facts.append(_CoreFacts(cpu, max_khz, scaling, capacity, name, rank))
    if freq_failures:
        offline = [c for c in cpus if c not in online]
        note = f"; offline: {','.join(map(str, offline))}" if offline else ""
        reasons.append(
            f"no maximum frequency for {len(freq_failures)} of {len(cpus)} CPUs ({freq_failures[0]}{note})"
        )
    if any(f.name is None for f in facts) and info.cpus:
        unnamed = [str(f.cpu) for f in facts if f.name is None]
        reasons.append(
            f"core type unknown for CPU {','.join(unnamed)} (not listed in /proc/cpuinfo; offline?)"
        )

    # A CPU without a frequency joins the one known-frequency group of its core type (an offline core of a
    # cluster); a CPU we know nothing about (offline, absent from /proc/cpuinfo) goes to an "unknown" group.
    known_freq = {f.name: f.max_khz for f in facts if f.max_khz is not None and f.name is not None}
    ambiguous = {f.name for f in facts if f.max_khz is not None and known_freq.get(f.name) != f.max_khz}
    for f in facts:
        if f.max_khz is None and f.name in known_freq and f.name not in ambiguous:
            f.max_khz = known_freq[f.name]
    groups: dict[tuple[int | None, str | None, int | None], list[_CoreFacts]] = {}
    for f in facts:
        groups.setdefault((f.max_khz, f.name, f.capacity), []).append(f)
    clusters: list[tuple[tuple, Cluster]] = []
    unknown: list[Cluster] = []
    for (max_khz, name, capacity), members in groups.items():
        scaling = min((m.scaling_khz for m in members if m.scaling_khz is not None), default=None)
        capped = scaling is not None and max_khz is not None and scaling < max_khz
        cluster = Cluster(
            cpus=[m.cpu for m in members],
            max_mhz=round(max_khz / 1000) if max_khz else None,
            core=name,
            scaling_max_mhz=round(scaling / 1000) if capped and scaling else None,
            capacity=capacity,
        )
        if max_khz is None and name is None and capacity is None and len(groups) > 1:
            cluster.kind = "unknown"
            unknown.append(cluster)
            continue
        key = (max_khz or 0, members[0].rank, capacity or 0, max(cluster.cpus))
        clusters.append((key, cluster))
    ordered = [c for _, c in sorted(clusters, key=lambda kc: kc[0], reverse=True)]
    _assign_kinds(ordered)
    return ordered + unknown


def _assign_kinds(clusters: list[Cluster]) -> None:
    if len(clusters) <= 1:
        for c in clusters:
            c.kind = "uniform"
        return
    for c in clusters:
        c.kind = "performance"
    clusters[-1].kind = "efficiency"
    first, second = clusters[0], clusters[1]
    if (
        len(clusters) >= 3
        and len(first.cpus) <= 2
        and first.max_mhz is not None
        and second.max_mhz is not None
        and first.max_mhz > second.max_mhz
    ):
        first.kind = "prime"
