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

import io
import sys
from dataclasses import dataclass, field

from edgepilot.device.cpu_parts import parse_hex

_GLOBAL_KEYS = {"hardware", "revision", "serial", "model", "processor_name"}
# Bounds for a hostile file: no kernel has more CPUs (x86 MAXSMP is 8192), an x86 block has ~30 fields and
# its `flags` line ~1.5 KB.
MAX_CPUS = 8192
MAX_FIELDS = 64
MAX_VALUE_CHARS = 8192


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
        first: list[str] | None = None
        common: set[str] = set()
        seen: set[str] = set()  # CPUs of one block share their raw line: split each distinct line once
        for cpu in self.cpus:
            raw = cpu.fields.get("features") or cpu.fields.get("flags") or ""
            if not raw.strip() or raw in seen:
                continue
            seen.add(raw)
            if first is None:
                first = raw.split()
                common = set(first)
            else:
                common.intersection_update(raw.split())
        return [f for f in first or [] if f in common]

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


def _put(fields: dict[str, str], key: str, value: str) -> None:
    if key in fields or len(fields) < MAX_FIELDS:
        fields[sys.intern(key)] = value[:MAX_VALUE_CHARS]


def parse_cpuinfo(text: str) -> CpuInfo:
    cpus: list[CpuEntry] = []
    machine: dict[str, str] = {}
    fields: dict[str, str] | None = None  # the field dict the next lines fill (shared by a group of CPUs)
    group_has_fields = False
    for raw in io.StringIO(text):
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
            if not 0 <= index < MAX_CPUS or len(cpus) >= MAX_CPUS:
                fields, group_has_fields = {}, True  # its fields go nowhere, not to the CPU before
                continue
            if fields is None or group_has_fields:
                fields, group_has_fields = {}, False
            # `processor : N` lines back to back share the coming fields: one dict for the whole group.
            cpus.append(CpuEntry(index, fields))
            continue
        if key in _GLOBAL_KEYS and (key != "model" or fields is None or _looks_global_model(value)):
            _put(machine, key, value)
            continue
        if fields is None:
            _put(machine, key, value)
            continue
        group_has_fields = True
        _put(fields, key, value)
    return CpuInfo(cpus=cpus, machine=machine)


def _looks_global_model(value: str) -> bool:
    # x86 has a per-CPU numeric `model : 140`; the Raspberry Pi kernel prints `Model : Raspberry Pi 5 ...`.
    return not value.strip().isdigit()
