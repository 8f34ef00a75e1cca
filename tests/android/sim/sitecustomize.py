"""SIMULATION: make this (glibc Linux) interpreter report what Android's Python reports, per PEP 738.

This is not Android. The kernel, libc, file system and llama.cpp build are this machine's; only what the
interpreter *says* about its platform changes, which is what edgepilot and its dependencies branch on:

- `sys.platform == "android"` (PEP 738; Termux's Python 3.13+ reports it),
- `platform.system() == "Android"` and `platform.uname().system == "Android"`, `platform.release()` the
  Android release (3.13's platform module does this on Android),
- `sys.getandroidapilevel()` (present on every Android build of CPython; Termux's minimum API level is 24),
- `platform.android_ver()` (3.13+), with `api_level`,
- `sysconfig.get_platform() == "android-24-<abi>"` (PEP 738's platform tag; pip derives wheel tags from it).

`os.uname()` stays Linux: Android's kernel is Linux, and PEP 738 leaves `os.uname()` alone.

Loaded as `sitecustomize` by putting this directory first on PYTHONPATH (tests/android/simkit.py does that
for the Android lane). psutil is imported before the switch: upstream psutil refuses `sys.platform ==
"android"` at import, while Termux ships a patched `python-psutil` that works there, so the already-imported
module stands in for Termux's. EDGEPILOT_SIM_ANDROID_API overrides the API level (default 24).
"""

from __future__ import annotations

import collections
import contextlib
import os
import platform
import sys
import sysconfig

API_LEVEL = int(os.environ.get("EDGEPILOT_SIM_ANDROID_API", "24"))
# Android releases by API level (developer.android.com/tools/releases/platforms)
RELEASES = {24: "7.0", 25: "7.1", 26: "8.0", 27: "8.1", 28: "9", 29: "10", 30: "11", 31: "12", 32: "12L",
            33: "13", 34: "14", 35: "15", 36: "16"}  # fmt: skip
# Android ABI names (PEP 738, sysconfig.get_platform() on Android)
ABIS = {"aarch64": "arm64_v8a", "armv7l": "armeabi_v7a", "armv8l": "armeabi_v7a", "x86_64": "x86_64",
        "i686": "x86"}  # fmt: skip

AndroidVer = collections.namedtuple(
    "AndroidVer", ["release", "api_level", "manufacturer", "model", "device", "is_emulator"]
)


def _simulate() -> None:
    with contextlib.suppress(ImportError):
        import psutil  # noqa: F401 - see the module docstring

    # sysconfig names its data module after sys.platform (_sysconfigdata__android_...), which only a real
    # Android build has: read this build's now, while the name is still right (cached from then on).
    sysconfig.get_config_vars()
    release = RELEASES.get(API_LEVEL, str(API_LEVEL))
    uname = platform.uname()  # computed now, on the real platform, then cached by the platform module
    platform._uname_cache = uname._replace(system="Android", release=release)  # type: ignore[attr-defined]
    abi = ABIS.get(uname.machine, uname.machine)

    def android_ver(*_args: object, **_kwargs: object) -> AndroidVer:
        return AndroidVer(release, API_LEVEL, "edgepilot", "simulated", "simulated", True)

    platform.android_ver = android_ver  # type: ignore[attr-defined]
    sys.getandroidapilevel = lambda: API_LEVEL  # type: ignore[attr-defined]
    sysconfig.get_platform = lambda: f"android-{API_LEVEL}-{abi}"
    sys.platform = "android"


if sys.platform.startswith("linux"):
    _simulate()
