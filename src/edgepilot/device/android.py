"""Android and Termux facts from `getprop` and the environment.

Android 12 (SDK 31) added the phantom-process killer: child processes of an app beyond 32 (or using much CPU)
are killed (termux/termux-app#2366). Android 12L+/13 has a developer option, "Disable child process
restrictions", which sets `persist.sys.fflag.override.settings_enable_monitor_phantom_procs=false`; the limit
itself is `device_config get activity_manager max_phantom_processes`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.device import commands

_PROP_LINE = r"^\[(?P<key>[^\]]+)\]:\s*\[(?P<value>.*)\]\s*$"  # compiled on first use (re's cache)
PHANTOM_FLAG = "persist.sys.fflag.override.settings_enable_monitor_phantom_procs"
DEFAULT_PHANTOM_LIMIT = 32


@dataclass
class AndroidFacts:
    sdk: int | None
    release: str | None
    model: str | None
    manufacturer: str | None
    soc: str | None
    termux: bool
    termux_version: str | None
    termux_apk_release: str | None
    abilist: list[str]
    os_64bit: bool | None
    phantom_process_limit: int | None  # None: no limit (pre-Android 12 or the restriction is disabled)
    phantom_process_note: str | None
    reasons: list[str] = field(default_factory=list)


def parse_getprop(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(_PROP_LINE, line.strip())
        if m:
            props[m.group("key")] = m.group("value")
    return props


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def is_termux(env: dict[str, str]) -> bool:
    return bool(env.get("TERMUX_VERSION")) or "com.termux" in env.get("PREFIX", "")


def read_android(root: Path, env: dict[str, str]) -> tuple[AndroidFacts | None, list[str]]:
    """(facts, reasons). Facts are None when this is not Android (no getprop and no Android environment)."""
    reasons: list[str] = []
    text, why = commands.run_command(root, ["getprop"])
    props = parse_getprop(text or "")
    android_env = bool(env.get("ANDROID_ROOT") or env.get("ANDROID_DATA"))
    if not props and not android_env and not is_termux(env):
        return None, []
    if not props:
        reasons.append(f"Android properties unavailable ({why})")
    sdk = _int(props.get("ro.build.version.sdk"))
    abilist = [a for a in props.get("ro.product.cpu.abilist", "").split(",") if a]
    abilist64 = props.get("ro.product.cpu.abilist64")
    if abilist64 is not None:
        os_64bit: bool | None = bool(abilist64.strip())
    elif abilist:
        os_64bit = any(a in ("arm64-v8a", "x86_64") for a in abilist)
    else:
        os_64bit = None
    soc = _soc(props)
    limit, note = _phantom(root, sdk, props)
    facts = AndroidFacts(
        sdk=sdk,
        release=props.get("ro.build.version.release") or None,
        model=props.get("ro.product.model") or None,
        manufacturer=props.get("ro.product.manufacturer") or None,
        soc=soc,
        termux=is_termux(env),
        termux_version=env.get("TERMUX_VERSION") or None,
        termux_apk_release=env.get("TERMUX_APK_RELEASE") or None,
        abilist=abilist,
        os_64bit=os_64bit,
        phantom_process_limit=limit,
        phantom_process_note=note,
        reasons=reasons,
    )
    return facts, reasons


def _soc(props: dict[str, str]) -> str | None:
    model = props.get("ro.soc.model", "").strip()
    maker = props.get("ro.soc.manufacturer", "").strip()
    if model:
        return f"{maker} {model}".strip() if maker and maker.lower() not in model.lower() else model
    for key in ("ro.board.platform", "ro.hardware.chipname", "ro.hardware", "ro.product.board"):
        if props.get(key):
            return props[key]
    return None


def _phantom(root: Path, sdk: int | None, props: dict[str, str]) -> tuple[int | None, str | None]:
    if sdk is None:
        return None, None
    if sdk < 31:
        return None, "Android < 12: no phantom-process killer"
    if props.get(PHANTOM_FLAG, "").lower() == "false":
        return (
            None,
            "phantom-process monitoring disabled (developer option 'Disable child process restrictions')",
        )
    text, _ = commands.run_command(
        root, ["device_config", "get", "activity_manager", "max_phantom_processes"]
    )
    value = _int((text or "").strip())
    if value is not None:
        return value, f"device_config activity_manager max_phantom_processes = {value}"
    return DEFAULT_PHANTOM_LIMIT, (
        "Android 12+ kills an app's child processes beyond 32 (termux/termux-app#2366); disable with the "
        "developer option 'Disable child process restrictions' or "
        "`device_config put activity_manager max_phantom_processes 2147483647`"
    )


def keep_alive_fix(a: AndroidFacts | None) -> str:
    """What keeps a Termux process alive in the background, for this Android version (said by the doctor's
    background-killed cause, and by run, chat and serve when Android moves them to a class it kills first)."""
    if a is not None and a.sdk == 31:
        disable = (
            'Android 12: `adb shell "/system/bin/device_config set_sync_disabled_for_tests persistent; '
            '/system/bin/device_config put activity_manager max_phantom_processes 2147483647"`'
        )
    else:
        disable = (
            "Android 12L+: `adb shell settings put global settings_enable_monitor_phantom_procs false` "
            "(or Developer options > Disable child process restrictions); Android 12: "
            "`adb shell /system/bin/device_config put activity_manager max_phantom_processes 2147483647`"
        )
    return (
        "keep the process alive in the background: run `termux-wake-lock` first and let Termux ignore "
        f"battery optimisation; stop Android's phantom-process killer: {disable} (termux/termux-app#2366)"
    )
