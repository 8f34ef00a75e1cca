"""Which kernel this interpreter runs on, with Android counted as the Linux it is.

Python 3.13+ on Android (Termux's Python) reports `sys.platform == "android"` and `platform.system() ==
"Android"` (PEP 738), not "linux": whatever needs the Linux kernel (cgroups, /proc, prctl) asks
`linux_kernel()`, never `sys.platform == "linux"`.
"""

from __future__ import annotations

import sys


def linux_kernel(platform: str | None = None) -> bool:
    """True on Linux and on Android (sys.platform "linux" before Python 3.13 there, "android" since)."""
    name = sys.platform if platform is None else platform
    return name.startswith("linux") or name == "android"


def android_python(platform: str | None = None) -> bool:
    """True when the interpreter says it is Android's (PEP 738)."""
    return (sys.platform if platform is None else platform) == "android"
