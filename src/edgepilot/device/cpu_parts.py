"""ARM `CPU implementer` / `CPU part` codes from /proc/cpuinfo -> core names.

Sources: util-linux sys-utils/lscpu-arm.c and the Linux kernel's arch/arm64/include/asm/cputype.h
(ARM_CPU_PART_*, QCOM_CPU_PART_*). Qualcomm's Kryo 2xx-5xx cores are Arm designs under Qualcomm's implementer
code; the "class" names the Arm core they derive from.

`rank` orders cores by per-core speed *within one SoC* (little < mid < big < prime). It only breaks ties
between clusters that share a maximum frequency (Snapdragon 8 Gen 2 runs its A715 and A710 pairs at
the same clock).
"""

from __future__ import annotations

from dataclasses import dataclass

IMPLEMENTERS: dict[int, str] = {
    0x41: "ARM",
    0x42: "Broadcom",
    0x43: "Cavium",
    0x46: "Fujitsu",
    0x48: "HiSilicon",
    0x4E: "NVIDIA",
    0x50: "APM",
    0x51: "Qualcomm",
    0x53: "Samsung",
    0x56: "Marvell",
    0x61: "Apple",
    0x69: "Intel",
    0x70: "Phytium",
    0xC0: "Ampere",
}


@dataclass(frozen=True)
class CorePart:
    name: str
    rank: int  # 1-9 efficiency cores, 10-19 performance cores, 20+ prime / X cores
    arm_class: str | None = None  # the Arm design a vendor core derives from, when known


_ARM: dict[int, CorePart] = {
    0xD01: CorePart("Cortex-A32", 1),
    0xD02: CorePart("Cortex-A34", 1),
    0xD03: CorePart("Cortex-A53", 2),
    0xD04: CorePart("Cortex-A35", 1),
    0xD05: CorePart("Cortex-A55", 3),
    0xD06: CorePart("Cortex-A65", 4),
    0xD07: CorePart("Cortex-A57", 10),
    0xD08: CorePart("Cortex-A72", 11),
    0xD09: CorePart("Cortex-A73", 12),
    0xD0A: CorePart("Cortex-A75", 13),
    0xD0B: CorePart("Cortex-A76", 14),
    0xD0C: CorePart("Neoverse-N1", 14),
    0xD0D: CorePart("Cortex-A77", 15),
    0xD0E: CorePart("Cortex-A76AE", 14),
    0xD40: CorePart("Neoverse-V1", 21),
    0xD41: CorePart("Cortex-A78", 16),
    0xD42: CorePart("Cortex-A78AE", 16),
    0xD43: CorePart("Cortex-A65AE", 4),
    0xD44: CorePart("Cortex-X1", 20),
    0xD46: CorePart("Cortex-A510", 5),
    0xD47: CorePart("Cortex-A710", 17),
    0xD48: CorePart("Cortex-X2", 21),
    0xD49: CorePart("Neoverse-N2", 17),
    0xD4A: CorePart("Neoverse-E1", 4),
    0xD4B: CorePart("Cortex-A78C", 16),
    0xD4C: CorePart("Cortex-X1C", 20),
    0xD4D: CorePart("Cortex-A715", 18),
    0xD4E: CorePart("Cortex-X3", 22),
    0xD4F: CorePart("Neoverse-V2", 22),
    0xD80: CorePart("Cortex-A520", 6),
    0xD81: CorePart("Cortex-A720", 19),
    0xD82: CorePart("Cortex-X4", 23),
    0xD83: CorePart("Neoverse-V3AE", 24),
    0xD84: CorePart("Neoverse-V3", 24),
    0xD85: CorePart("Cortex-X925", 24),
    0xD87: CorePart("Cortex-A725", 19),
    0xD8E: CorePart("Neoverse-N3", 19),
}

_QUALCOMM: dict[int, CorePart] = {
    0x001: CorePart("Oryon", 24),
    0x002: CorePart("Oryon (2nd gen)", 25),
    0x201: CorePart("Kryo", 10),
    0x205: CorePart("Kryo", 10),
    0x211: CorePart("Kryo", 10),
    0x800: CorePart("Kryo 2xx Gold", 12, "Cortex-A73"),
    0x801: CorePart("Kryo 2xx Silver", 2, "Cortex-A53"),
    0x802: CorePart("Kryo 3xx Gold", 13, "Cortex-A75"),
    0x803: CorePart("Kryo 3xx Silver", 3, "Cortex-A55"),
    0x804: CorePart("Kryo 4xx Gold", 14, "Cortex-A76"),
    0x805: CorePart("Kryo 4xx/5xx Silver", 3, "Cortex-A55"),
    0xC00: CorePart("Falkor", 13),
    0xC01: CorePart("Saphira", 13),
}

_SAMSUNG: dict[int, CorePart] = {
    0x001: CorePart("Exynos M1/M2", 12),
    0x002: CorePart("Exynos M3", 13),
    0x003: CorePart("Exynos M4", 14),
    0x004: CorePart("Exynos M5", 15),
}

_OTHERS: dict[int, dict[int, CorePart]] = {
    0x42: {0x100: CorePart("Brahma-B53", 2), 0x516: CorePart("ThunderX2", 12)},
    0x48: {0xD01: CorePart("Kunpeng-920 (TSV110)", 14), 0xD40: CorePart("Cortex-A76", 14)},
    0x4E: {0x003: CorePart("Denver 2", 12), 0x004: CorePart("Carmel", 13)},
    0x61: {
        0x022: CorePart("Icestorm (M1)", 5),
        0x023: CorePart("Firestorm (M1)", 25),
        0x032: CorePart("Blizzard (M2)", 6),
        0x033: CorePart("Avalanche (M2)", 26),
    },
    0xC0: {0xAC3: CorePart("Ampere-1", 20), 0xAC4: CorePart("Ampere-1a", 21)},
}

_BY_IMPLEMENTER: dict[int, dict[int, CorePart]] = {0x41: _ARM, 0x51: _QUALCOMM, 0x53: _SAMSUNG, **_OTHERS}


def parse_hex(text: str | None) -> int | None:
    if not text:
        return None
    try:
        return int(text.strip(), 0)
    except ValueError:
        return None


def lookup(implementer: int | None, part: int | None) -> CorePart | None:
    if implementer is None or part is None:
        return None
    return _BY_IMPLEMENTER.get(implementer, {}).get(part)


def core_name(implementer: int | None, part: int | None) -> str | None:
    """Human name: "Cortex-A76", "Kryo 4xx Gold (Cortex-A76 class)", or "Qualcomm part 0x123" if unknown."""
    if implementer is None or part is None:
        return None
    known = lookup(implementer, part)
    if known is not None:
        return f"{known.name} ({known.arm_class} class)" if known.arm_class else known.name
    vendor = IMPLEMENTERS.get(implementer, f"implementer 0x{implementer:02x}")
    return f"{vendor} part 0x{part:03x}"


def core_rank(implementer: int | None, part: int | None) -> int:
    known = lookup(implementer, part)
    return known.rank if known is not None else 0
