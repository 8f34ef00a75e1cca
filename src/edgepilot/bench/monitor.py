"""Temperature and battery power while a test runs; throttling verdicts; cool-down waits.

Sensors are found once (the CPU-looking thermal zones, the battery); during a test a background thread reads
only their few files every half second. With nothing readable (this is common: Android 15 and SELinux hide
/sys/class/thermal from apps) no thread runs and every figure is None.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.device import fs
from edgepilot.device.power import POWER, read_battery, supply_watts
from edgepilot.device.thermal import THERMAL, cpu_zones, read_thermal, to_celsius

INTERVAL = 0.5
# A test throttled if its speed fell this much across repetitions while the CPU warmed up this much.
SPEED_DROP = 0.05
TEMP_RISE = 2.0


@dataclass
class Reading:
    temp_start_c: float | None = None
    temp_max_c: float | None = None
    temp_end_c: float | None = None
    watts: float | None = None  # mean battery draw while discharging; None when plugged in or unreadable
    samples: int = 0


@dataclass
class Sensors:
    root: Path
    zones: list[str] = field(default_factory=list)  # thermal_zoneN directories that look like CPU/SoC sensors
    battery: str | None = None  # power_supply directory of a battery whose power is readable
    notes: list[str] = field(default_factory=list)
    power_note: str | None = None  # a battery whose draw cannot be measured, and why (None: no battery)

    @classmethod
    def find(cls, root: Path = fs.LIVE_ROOT) -> Sensors:
        found = cls(root)
        zones, reasons = read_thermal(root)
        found.zones = [z.zone for z in cpu_zones(zones)]
        if not found.zones:
            found.notes.append(reasons[0] if reasons else "no readable thermal zone")
        battery, why = read_battery(root)
        if battery is not None and battery.watts is not None:
            found.battery = battery.name  # sampled while it discharges: unplugged later still counts
        if battery is not None and battery.status in ("Charging", "Full", "Not charging"):
            found.power_note = f"battery {battery.status.lower()}: power draw not measurable while plugged in"
        elif battery is not None and battery.watts is None:
            found.power_note = why[0] if why else "battery power unreadable"
        if found.power_note or (why and battery is None):
            found.notes.append(found.power_note or why[0])
        return found

    @property
    def active(self) -> bool:
        return bool(self.zones or self.battery)

    def temperature(self) -> float | None:
        temps = []
        for zone in self.zones:
            raw, _ = fs.read_int(self.root, f"{THERMAL}/{zone}/temp")
            c = to_celsius(raw) if raw is not None else None
            if c is not None:
                temps.append(c)
        return max(temps) if temps else None

    def watts(self) -> float | None:
        if self.battery is None:
            return None
        base = f"{POWER}/{self.battery}"
        status, _ = fs.read_text(self.root, f"{base}/status", fs.VALUE_FILE)
        if (status or "").strip() != "Discharging":
            return None  # plugged in: current_now is the charger's flow, not the draw
        return supply_watts(self.root, base)[0]


class Recording:
    """Samples sensors in the background between start() and stop()."""

    def __init__(self, sensors: Sensors, interval: float = INTERVAL) -> None:
        self.sensors = sensors
        self.interval = interval
        self.temps: list[float] = []
        self.watts: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.start_temp: float | None = None

    def _sample(self) -> None:
        t = self.sensors.temperature()
        if t is not None:
            self.temps.append(t)
        w = self.sensors.watts()
        if w is not None:
            self.watts.append(w)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self) -> Recording:
        if self.sensors.active:
            self._sample()
            self.start_temp = self.temps[0] if self.temps else None
            self._thread = threading.Thread(target=self._loop, name="edgepilot-sensors", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> Reading:
        if self._thread is None:
            return Reading()
        self._stop.set()
        self._thread.join()
        self._sample()
        return Reading(
            temp_start_c=self.start_temp,
            temp_max_c=max(self.temps) if self.temps else None,
            temp_end_c=self.temps[-1] if self.temps else None,
            watts=round(statistics.fmean(self.watts), 3) if self.watts else None,
            samples=len(self.temps) + len(self.watts),
        )


def throttle_verdict(samples_ts: list[float], reading: Reading) -> tuple[bool | None, str]:
    """Speed falling across repetitions while the temperature rises = thermal throttling.

    Returns (verdict, note): True/False, or None when it cannot be told (too few repetitions, no sensor).
    """
    if len(samples_ts) < 3:
        return None, ""
    third = max(1, len(samples_ts) // 3)
    early = statistics.fmean(samples_ts[:third])
    late = statistics.fmean(samples_ts[-third:])
    drop = (early - late) / early if early > 0 else 0.0
    if reading.temp_start_c is None or reading.temp_end_c is None:
        if drop >= 2 * SPEED_DROP:
            return None, f"speed fell {drop:.0%} across repetitions (no temperature sensor: heat or load?)"
        return None, ""
    rise = reading.temp_end_c - reading.temp_start_c
    if drop >= SPEED_DROP and rise >= TEMP_RISE:
        return True, f"speed fell {drop:.0%} while the CPU warmed {rise:+.1f} °C: thermal throttling"
    return False, ""


def cool_down(
    sensors: Sensors,
    baseline: float | None,
    seconds: float,
    on_wait: Callable[[str], None] | None = None,
) -> float:
    """Wait until the CPU is back within 1 °C of `baseline`, at most `seconds`; just sleep without a sensor.

    Returns the seconds waited.
    """
    if seconds <= 0:
        return 0.0
    t0 = time.monotonic()
    if baseline is None or not sensors.zones:
        time.sleep(seconds)
        return seconds
    while time.monotonic() - t0 < seconds:
        now = sensors.temperature()
        if now is None or now <= baseline + 1.0:
            break
        if on_wait:
            on_wait(f"cooling down: {now:.1f} °C → {baseline + 1.0:.1f} °C")
        time.sleep(min(1.0, seconds))
    return time.monotonic() - t0
