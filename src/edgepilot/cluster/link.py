"""A network link between the main device and a helper: one-way latency and rate, from `--link 10ms,50Mbit`
or a profile name (usb, wifi, poor-wifi)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from edgepilot.errors import UserError

MAX_LATENCY_S = 10.0
MIN_RATE_BITS = 1e3
MAX_RATE_BITS = 1e12
_TIME = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_RATE = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_PART = re.compile(r"(\d{1,9}(?:\.\d{1,9})?) ?([a-zµ]{1,4})")


@dataclass(frozen=True)
class Link:
    latency_s: float  # one way: a round trip costs twice this
    rate_bits: float  # per second, each direction

    @property
    def rtt_s(self) -> float:
        return 2 * self.latency_s

    def transfer_s(self, n_bytes: float) -> float:
        return n_bytes * 8 / self.rate_bits

    @property
    def label(self) -> str:
        ms = self.latency_s * 1e3
        rate = self.rate_bits / 1e6
        return f"{ms:g}ms,{rate:g}Mbit"


PROFILES = {
    "usb": Link(0.002, 300e6),  # USB tethering
    "wifi": Link(0.010, 50e6),  # good Wi-Fi
    "poor-wifi": Link(0.030, 10e6),  # poor Wi-Fi
}


def parse_link(text: str) -> Link:
    """'10ms,50Mbit' (latency one way, then rate; us/ms/s and bit/Kbit/Mbit/Gbit) or a profile name."""
    raw = str(text).strip().lower()
    if raw in PROFILES:
        return PROFILES[raw]
    hint = f"write LATENCY,RATE (e.g. 10ms,50Mbit) or one of {', '.join(PROFILES)}"
    parts = [p.strip() for p in raw.split(",")]
    if len(raw) > 40 or len(parts) != 2:
        raise UserError(f"--link {text[:40]!r}: {hint}")
    found = [_PART.fullmatch(p) for p in parts]
    if found[0] is None or found[0].group(2) not in _TIME:
        raise UserError(f"--link {text!r}: cannot read the latency {parts[0]!r} (us, ms or s); {hint}")
    if found[1] is None or found[1].group(2) not in _RATE:
        raise UserError(f"--link {text!r}: cannot read the rate {parts[1]!r} (bit, Kbit, Mbit, Gbit); {hint}")
    latency = float(found[0].group(1)) * _TIME[found[0].group(2)]
    rate = float(found[1].group(1)) * _RATE[found[1].group(2)]
    if not math.isfinite(latency) or latency > MAX_LATENCY_S:
        raise UserError(f"--link {text!r}: a latency above {MAX_LATENCY_S:g} s is no link to pool over")
    if not MIN_RATE_BITS <= rate <= MAX_RATE_BITS:
        raise UserError(f"--link {text!r}: choose a rate between 1Kbit and 1000Gbit")
    return Link(latency, rate)
