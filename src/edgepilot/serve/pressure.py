"""Watch the device's memory pressure and refuse new work before Android's lmkd (or the OOM killer) strikes.

lmkd decides on PSI memory stalls and on free memory; a generation that starts now touches more of the
compute buffer and keeps the CPU busy while the system reclaims. So when PSI "some" avg10 climbs past the
limit, or MemAvailable falls under a floor, new requests get 503 + Retry-After until it eases (with
hysteresis, so the gate does not flap).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from edgepilot.device.memory import read_memory
from edgepilot.device.thermal import hottest_cpu, read_thermal
from edgepilot.serve.state import Pressure

SAMPLE_SECONDS = 1.0
THERMAL_EVERY = 5  # samples
RELEASE_PSI = 0.7  # a closed gate opens again below 70 % of the PSI limit ...
RELEASE_MEM = 1.2  # ... and above 120 % of the memory floor


def gate(
    pressure: Pressure, psi_limit: float, min_available: int, was_gated: bool
) -> tuple[bool, str | None]:
    psi, avail = pressure.psi_some_avg10, pressure.available_bytes
    mib = 1 << 20
    if psi is not None and psi >= psi_limit:
        return True, f"memory pressure: PSI some avg10 {psi:.1f} % >= {psi_limit:g} %"
    if avail is not None and avail < min_available:
        return True, f"low memory: {avail / mib:.0f} MiB available < {min_available / mib:.0f} MiB"
    if was_gated:
        psi_high = psi is not None and psi >= psi_limit * RELEASE_PSI
        avail_low = avail is not None and avail < min_available * RELEASE_MEM
        if psi_high or avail_low:
            return True, "memory pressure easing"
    return False, None


def read_pressure(root: Path, with_thermal: bool, previous: Pressure) -> Pressure:
    m = read_memory(root)
    reading = Pressure(
        available_bytes=m.available_bytes,
        total_bytes=m.total_bytes,
        psi_some_avg10=m.psi_some_avg10,
        celsius=previous.celsius,
        zone=previous.zone,
    )
    if with_thermal:
        zones, _ = read_thermal(root)
        hot = hottest_cpu(zones)
        reading.celsius = hot.celsius if hot else None
        reading.zone = (hot.type or hot.zone) if hot else None
    return reading


class PressureWatch(threading.Thread):
    def __init__(
        self,
        root: Path,
        psi_limit: float,
        min_available: int,
        publish: Callable[[Pressure], None],
        on_change: Callable[[bool, str | None], None],
    ) -> None:
        super().__init__(name="pressure-watch", daemon=True)
        self.root, self.psi_limit, self.min_available = root, psi_limit, min_available
        self.publish, self.on_change = publish, on_change
        self.stop = threading.Event()
        self.current = Pressure()

    def sample(self, n: int) -> Pressure:
        reading = read_pressure(self.root, n % THERMAL_EVERY == 0, self.current)
        reading.gated, reading.reason = gate(reading, self.psi_limit, self.min_available, self.current.gated)
        if reading.gated != self.current.gated:
            self.on_change(reading.gated, reading.reason)
        self.current = reading
        self.publish(reading)
        return reading

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            try:
                self.sample(n)
            except Exception as exc:  # a reader bug must not take the gate down with it: stay open, say so
                self.current = Pressure(reason=f"memory watch failed: {type(exc).__name__}: {exc}")
                self.publish(self.current)
            n += 1
            self.stop.wait(SAMPLE_SECONDS)
