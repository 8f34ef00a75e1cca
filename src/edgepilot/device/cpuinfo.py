"""Parse /proc/cpuinfo in the shapes real kernels print it.

- arm64, one block per CPU: `processor`, `BogoMIPS`, `Features`, `CPU implementer`, `CPU part`, ...
- arm64 seen by a 32-bit (compat) process: the same plus `model name : ARMv8 Processor rev N (v8l)` and the
  32-bit hwcap names in `Features` (half thumb fastmult vfp edsp neon ...).
- old Qualcomm kernels: a `Processor : AArch64 Processor rev 4 (aarch64)` header, then `processor : 0` ...
  `processor : 7` with no fields in between and ONE trailing block of fields that applies to all of them.
- x86: one block per logical CPU with `vendor_id`, `model name`, `flags`, `cpu MHz`, `physical id`, `core id`.
- trailing machine-wide keys: `Hardware`, `Revision`, `Serial`, `Model` (Raspberry Pi).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgepilot.device.cpu_parts import parse_hex

_GLOBAL_KEYS = {"hardware", "revision", "serial", "model", "processor_name"}


@dataclass
class CpuEntry:
    index: int
    fields: dict[str, str] = field(default_factory=dict)

    def get(self, key: str) -> str | None:
        return self.fields.get(key)

    @property
    def implementer(self) -> int | None:
        return parse_hex(self.fields.get("cpu implementer"))

    @property
    def part(self) -> int | None:
        return parse_hex(self.fields.get("cpu part"))

    @property
    def features(self) -> list[str]:
        raw = self.fields.get("features") or self.fields.get("flags") or ""
        return raw.split()


@dataclass
class CpuInfo:
    cpus: list[CpuEntry]
    machine: dict[str, str]  # Hardware / Model / Revision / the old-style `Processor` header

    @property
    def kind(self) -> str:
        """ "arm", "x86" or "unknown": which architecture this cpuinfo describes."""
        for cpu in self.cpus:
            if "cpu implementer" in cpu.fields or "cpu architecture" in cpu.fields:
                return "arm"
            if "vendor_id" in cpu.fields or "flags" in cpu.fields:
                return "x86"
        return "unknown"

    def common_features(self) -> list[str]:
        """Features every listed CPU has, in the order the kernel prints them."""
        lists = [c.features for c in self.cpus if c.features]
        if not lists:
            return []
        common = set(lists[0]).intersection(*map(set, lists[1:]))
        return [f for f in lists[0] if f in common]

    def arm_architecture(self) -> int | None:
        for cpu in self.cpus:
            value = cpu.get("cpu architecture")
            if value:
                try:
                    return int(value.split()[0], 0)
                except ValueError:
                    if value.strip().upper().startswith("AARCH64"):
                        return 8
        return None


def _split(line: str) -> tuple[str, str] | None:
    if ":" not in line:
        return None
    key, _, value = line.partition(":")
    key = key.strip()
    if not key:
        return None
    # "Processor" (capital P, old ARM header) is machine-wide; "processor" is the CPU index.
    if key == "Processor":
        return "processor_name", value.strip()
    return key.lower(), value.strip()


def parse_cpuinfo(text: str) -> CpuInfo:
    cpus: list[CpuEntry] = []
    machine: dict[str, str] = {}
    group: list[CpuEntry] = []  # CPUs that receive the next field lines
    group_has_fields = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        kv = _split(line)
        if kv is None:
            continue
        key, value = kv
        if key == "processor":
            try:
                index = int(value.split()[0])
            except (ValueError, IndexError):
                continue
            entry = CpuEntry(index)
            cpus.append(entry)
            if group and not group_has_fields:
                group.append(entry)  # `processor : N` lines back to back share the coming fields
            else:
                group = [entry]
                group_has_fields = False
            continue
        if key in _GLOBAL_KEYS and (key != "model" or not group or _looks_global_model(value)):
            machine[key] = value
            continue
        if not group:
            machine[key] = value
            continue
        group_has_fields = True
        for entry in group:
            entry.fields[key] = value
    return CpuInfo(cpus=cpus, machine=machine)


def _looks_global_model(value: str) -> bool:
    # x86 has a per-CPU numeric `model : 140`; the Raspberry Pi kernel prints `Model : Raspberry Pi 5 ...`.
    return not value.strip().isdigit()
