"""Thermal zones: /sys/class/thermal/thermal_zoneN/{type,temp}.

`temp` is in millidegrees Celsius; a few drivers report whole degrees, and disabled sensors report nonsense
(-274000, 0x7fffffff). Android 15 and some vendors deny the directory to apps (SELinux): that is a reason, not
an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from edgepilot.device import fs

THERMAL = "sys/class/thermal"
NAME_CHARS = 64  # the kernel's THERMAL_NAME_LENGTH is 20
# patterns as strings: re compiles (and caches) them when first used, not on import
_ZONE = r"^thermal_zone(\d+)$"
_CPU_ZONE = r"cpu|cpuss|apc|big|little|mid|soc|tsens|x86_pkg|cluster"


@dataclass
class ThermalZone:
    zone: str  # thermal_zone3
    type: str | None  # cpu-1-0-usr, x86_pkg_temp, soc_thermal ...
    celsius: float | None


def to_celsius(raw: int) -> float | None:
    value = raw / 1000 if abs(raw) >= 1000 else float(raw)
    if value < -40 or value > 150:
        return None
    return round(value, 1)


def read_thermal(root: Path) -> tuple[list[ThermalZone], list[str]]:
    names, why = fs.list_dir(root, THERMAL)
    if why:
        return [], [f"thermal zones unavailable ({why})"]
    zones: list[ThermalZone] = []
    failed: list[str] = []
    zone = re.compile(_ZONE).match
    for name in sorted((n for n in names if zone(n)), key=lambda n: int(zone(n).group(1))):
        kind, _ = fs.read_text(root, f"{THERMAL}/{name}/type", fs.VALUE_FILE)
        raw, why_temp = fs.read_int(root, f"{THERMAL}/{name}/temp")
        celsius = to_celsius(raw) if raw is not None else None
        if raw is None:
            failed.append(why_temp or name)
        zones.append(ThermalZone(name, kind.strip()[:NAME_CHARS] if kind else None, celsius))
    reasons = []
    if failed:
        reasons.append(f"{len(failed)} of {len(zones)} thermal zones unreadable ({failed[0]})")
    if not zones:
        reasons.append(f"no thermal zones under /{THERMAL}")
    return zones, reasons


def cpu_zones(zones: list[ThermalZone]) -> list[ThermalZone]:
    """The readable zones that look like CPU/SoC sensors (every readable zone when none does)."""
    readable = [z for z in zones if z.celsius is not None]
    return [z for z in readable if z.type and re.search(_CPU_ZONE, z.type, re.IGNORECASE)] or readable


def hottest_cpu(zones: list[ThermalZone]) -> ThermalZone | None:
    """The hottest zone that looks like a CPU/SoC sensor (falls back to the hottest of all)."""
    pool = cpu_zones(zones)
    return max(pool, key=lambda z: z.celsius or 0.0) if pool else None


def reread(root: Path, zones: list[ThermalZone]) -> list[ThermalZone]:
    """These zones read again (their temp files only); one unreadable this time is left out."""
    fresh = []
    for z in zones:
        raw, _ = fs.read_int(root, f"{THERMAL}/{z.zone}/temp")
        celsius = to_celsius(raw) if raw is not None else None
        if celsius is not None:
            fresh.append(ThermalZone(z.zone, z.type, celsius))
    return fresh
