"""Battery facts from /sys/class/power_supply/*/{type,status,capacity,current_now,voltage_now,temp}.

current_now is in microamperes and voltage_now in microvolts; the sign of current_now differs between vendors
(Qualcomm: negative while charging on some kernels, positive on others), so watts are reported unsigned and
`status` says which way the power flows. Some batteries have power_now (microwatts) instead. temp is in tenths
of a degree Celsius.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgepilot.device import fs

POWER = "sys/class/power_supply"


@dataclass
class BatteryFacts:
    name: str
    status: str | None  # Charging / Discharging / Full / Not charging
    capacity_percent: int | None
    current_ma: float | None
    voltage_v: float | None
    watts: float | None
    temp_c: float | None
    plugged: bool | None  # any USB/AC/wireless supply online


def read_battery(root: Path) -> tuple[BatteryFacts | None, list[str]]:
    names, why = fs.list_dir(root, POWER)
    if why:
        return None, [f"battery unavailable ({why})"]
    battery_name = None
    plugged: bool | None = None
    for name in names:
        kind, _ = fs.read_text(root, f"{POWER}/{name}/type", fs.VALUE_FILE)
        kind = (kind or "").strip()
        if kind == "Battery" and battery_name is None:
            battery_name = name
        elif kind in ("USB", "Mains", "Wireless", "USB_PD", "USB_C"):
            online, _ = fs.read_int(root, f"{POWER}/{name}/online")
            if online is not None:
                plugged = bool(plugged) or online == 1
    if battery_name is None:
        return None, ["no battery under /sys/class/power_supply (mains-powered, or hidden from apps)"]
    base = f"{POWER}/{battery_name}"
    status, _ = fs.read_text(root, f"{base}/status", fs.VALUE_FILE)
    capacity, _ = fs.read_int(root, f"{base}/capacity")
    current, _ = fs.read_int(root, f"{base}/current_now")
    voltage, _ = fs.read_int(root, f"{base}/voltage_now")
    temp, _ = fs.read_int(root, f"{base}/temp")
    reasons = []
    watts, why_watts = supply_watts(root, base)
    if watts is not None:
        watts = round(watts, 2)
    else:
        reasons.append(f"battery power unknown ({why_watts})")
    return (
        BatteryFacts(
            name=battery_name,
            status=status.strip()[:64] if status else None,
            capacity_percent=capacity,
            current_ma=round(current / 1000, 1) if current is not None else None,
            voltage_v=round(voltage / 1e6, 3) if voltage is not None else None,
            watts=watts,
            temp_c=temp / 10 if temp is not None else None,
            plugged=plugged,
        ),
        reasons,
    )


def supply_watts(root: Path, base: str) -> tuple[float | None, str | None]:
    """The power through a supply in W, unsigned: current_now × voltage_now, else power_now; (None, why) when
    neither is readable. `base`: its directory under the root, e.g. sys/class/power_supply/battery."""
    current, why_current = fs.read_int(root, f"{base}/current_now")
    voltage, why_voltage = fs.read_int(root, f"{base}/voltage_now")
    if current is not None and voltage is not None:
        return abs(current) * voltage / 1e12, None
    power, _ = fs.read_int(root, f"{base}/power_now")
    if power is not None:
        return abs(power) / 1e6, None
    return None, why_current or why_voltage
