"""Should llama.cpp's Vulkan backend be used on this GPU? Rules and known-bad driver/GPU pairs.

ggml-vulkan checks only the instance version against 1.2 ("Vulkan 1.2 required") and uses a device when it has
storageBuffer16BitAccess. It then takes bufferDeviceAddress from the Vulkan 1.2 feature struct: drivers
whose device apiVersion is below 1.2 (old Mali) fill that struct yet return NULL for vkGetBufferDeviceAddress,
and the first buffer allocation crashes at address 0 (llama.cpp PR #28593, whisper.cpp #3590). So a device
apiVersion below 1.2 is not usable, whatever the loader says. The known issues below come from llama.cpp's
tracker (references.md, "Drivers with known trouble").

final_verdict() sums a device up in one word for probe's `verdict`: the driver check's outcome when it failed
(engine/gpu_check.py), a software rasterizer, the rules above, the check when it passed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VENDOR_ARM = 0x13B5
VENDOR_QUALCOMM = 0x5143
VENDOR_IMAGINATION = 0x1010
# A check that ended like this makes the verdict (engine/gpu_check.py outcomes).
CHECK_CRASHED = ("crashed", "hung")
CHECK_FAILED = ("failed",)
VERDICTS = (
    "usable", "known-bad", "crashed", "failed", "slow-software", "not-listed", "unknown", "needs-fix",
)  # fmt: skip
FIX_COMMAND = "edgepilot build --vulkan"
# vulkan_fix on a device: "needed" (below 1.2, this llama.cpp lacks edgepilot's fix, nothing else blocks),
# "applied" (below 1.2, the llama.cpp in use carries it: toolchain/vulkan_fix.py)


@dataclass(frozen=True)
class KnownIssue:
    key: str
    blocking: bool  # True: do not offload; False: a caveat to check (benchmark first)
    text: str
    refs: tuple[str, ...]

    def matches(self, dev: VulkanDeviceLike) -> bool:
        return _MATCHERS[self.key](dev)


class VulkanDeviceLike:  # structural: gpu.VulkanDevice satisfies this
    name: str
    vendor_id: int | None
    driver_id: str | None
    driver_name: str | None
    device_type: str | None


def _is_turnip(d: VulkanDeviceLike) -> bool:
    return (
        "TURNIP" in (d.driver_id or "").upper() or "turnip" in (d.name + " " + (d.driver_name or "")).lower()
    )


def _is_panvk(d: VulkanDeviceLike) -> bool:
    return "PANVK" in (d.driver_id or "").upper() or "panvk" in (d.name + " " + (d.driver_name or "")).lower()


def _is_qualcomm_proprietary(d: VulkanDeviceLike) -> bool:
    qualcomm = d.vendor_id == VENDOR_QUALCOMM or "adreno" in d.name.lower()
    return qualcomm and not _is_turnip(d)


def _is_mali_proprietary(d: VulkanDeviceLike) -> bool:
    mali = d.vendor_id == VENDOR_ARM or d.name.lower().startswith(("mali", "immortalis"))
    return mali and not _is_panvk(d)


def _is_powervr(d: VulkanDeviceLike) -> bool:
    return d.vendor_id == VENDOR_IMAGINATION or "powervr" in d.name.lower()


def _is_v3d(d: VulkanDeviceLike) -> bool:
    return re.search(r"\bv3d\b", d.name.lower()) is not None or "V3DV" in (d.driver_id or "").upper()


_MATCHERS = {
    "adreno-proprietary": _is_qualcomm_proprietary,
    "turnip-subgroup-128": _is_turnip,
    "mali-g715-device-lost": lambda d: _is_mali_proprietary(d) and re.search(r"\bG715\b", d.name) is not None,
    "panvk-slow": _is_panvk,
    "mali-slower-than-cpu": _is_mali_proprietary,
    "turnip-adreno-702-mul-mat": lambda d: _is_turnip(d) and re.search(r"\b702\b", d.name) is not None,
    "mali-g720-assert": lambda d: _is_mali_proprietary(d) and re.search(r"\bG720\b", d.name) is not None,
    "powervr-zero-tokens": _is_powervr,
    "v3d-slow": _is_v3d,
}

KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue(
        "adreno-proprietary",
        True,
        "Qualcomm's Adreno Vulkan driver fails to build llama.cpp's shaders: a failed pipeline link crashes "
        "(Adreno 740, #19746), createComputePipeline returns ErrorUnknown (Adreno 690, #9452), output can be "
        "gibberish (Adreno 732, #16881, #26314), Adreno 830 createComputePipeline ErrorUnknown (#28635), "
        "Adreno 730 driver 0615.95 SIGSEGV in create_buffer (jegly/Box #109), Adreno 6xx lack 16-bit "
        "storage; maintainers: 'Currently Adreno GPUs just don't work' (#12421); Mesa Turnip works",
        (
            "llama.cpp#19746",
            "llama.cpp#9452",
            "llama.cpp#12421",
            "llama.cpp#16881",
            "llama.cpp#26314",
            "llama.cpp#28635",
            "jegly/Box#109",
        ),
    ),
    KnownIssue(
        "turnip-subgroup-128",
        False,
        "Mesa Turnip reports subgroupSize 128; llama.cpp builds before the fix for #25734 give wrong matmul "
        "results: use a recent build and check output against the CPU backend",
        ("llama.cpp#25734",),
    ),
    KnownIssue(
        "mali-g715-device-lost",
        True,
        "Mali-G715 loses the device (vk::DeviceLostError) with quantized models and long prefills",
        ("llama.cpp#10406", "llama.cpp#23359"),
    ),
    KnownIssue(
        "panvk-slow",
        True,
        "Mesa PanVK on Mali is 5-10x slower than llama.cpp's CPU backend (RK3588 Mali-G610: 3.3 vs 35.9 t/s "
        "prompt, 5.7 vs 25.7 t/s generation)",
        ("llama.cpp#22682", "llama.cpp#17783"),
    ),
    KnownIssue(
        "mali-slower-than-cpu",
        False,
        "Arm Mali iGPUs are often slower than the CPU backend for LLMs: benchmark before offloading",
        ("llama.cpp#22682",),
    ),
    KnownIssue(
        "turnip-adreno-702-mul-mat",
        True,
        "Mesa Turnip on Adreno 702 computes MUL_MAT wrongly for n <= 8 (generation): wrong output",
        ("llama.cpp#25906",),
    ),
    KnownIssue(
        "mali-g720-assert",
        False,
        "Mali-G720's proprietary driver (CIX) hits a driver assert in llama.cpp; Mesa PanVK works",
        ("llama.cpp#23057",),
    ),
    KnownIssue(
        "powervr-zero-tokens",
        True,
        "PowerVR (DXT-48-1536, Tensor G5) generates token 0 every step unless GGML_VK_DISABLE_COOPMAT=1 "
        "GGML_VK_DISABLE_COOPMAT2=1 GGML_VK_DISABLE_INTEGER_DOT_PRODUCT=1 are set",
        ("llama.cpp#28502",),
    ),
    KnownIssue(
        "v3d-slow",
        True,
        "Raspberry Pi 5's V3D driver hangs in llama.cpp's shaders and is slower than the CPU backend",
        ("llama.cpp#5237", "llama.cpp#9801"),
    ),
)


@dataclass
class NamedDevice:
    """A device known by what llama.cpp calls it (`--list-devices`' description), for the blocklist."""

    name: str
    vendor_id: int | None = None
    driver_id: str | None = None
    driver_name: str | None = None
    device_type: str | None = None


def known_blocking(description: str) -> KnownIssue | None:
    """The blocking known issue a device of this description matches (by name: no driver facts)."""
    dev = NamedDevice(description)
    return next((i for i in KNOWN_ISSUES if i.blocking and i.matches(dev)), None)


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """ "1.4.305", "4198599 (1.1.199)", "1.3.318 (4206910)" -> (1, 4, 305)."""
    if not text:
        return None
    dotted = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if dotted:
        return tuple(int(g) for g in dotted.groups() if g is not None)
    number = re.search(r"\d+", text)
    if number:  # packed VK_MAKE_API_VERSION
        v = int(number.group(0))
        return ((v >> 22) & 0x7F, (v >> 12) & 0x3FF, v & 0xFFF)
    return None


def judge(
    dev: VulkanDeviceLike,
    api: tuple[int, ...] | None,
    instance: tuple[int, ...] | None,
    storage16: bool | None,
    fixed: bool = False,
) -> tuple[bool | None, list[str], list[str]]:
    """(usable, reasons, issue refs). usable None = cannot tell (apiVersion unknown). `fixed`: the llama.cpp
    that will use the device carries edgepilot's old-Mali fix (`edgepilot build --vulkan`)."""
    reasons: list[str] = []
    refs: list[str] = []
    usable: bool | None = True
    fixable: list[int] = []  # reasons the fix answers: they name it only when nothing else blocks
    if is_software(dev):
        return False, ["software rasterizer (runs on the CPU): slower than llama.cpp's own CPU backend"], []
    if instance is not None and instance[:2] < (1, 2):
        if fixed:
            reasons.append(f"Vulkan loader/instance {_fmt(instance)} < 1.2: accepted by edgepilot's fix")
        else:
            usable = False
            fixable.append(len(reasons))
            reasons.append(
                f"Vulkan loader/instance {_fmt(instance)} < 1.2: llama.cpp refuses it ('Vulkan 1.2 required')"
            )
    if api is None:
        usable = None if usable else usable
        reasons.append("device apiVersion unknown")
    elif api[:2] < (1, 2) and fixed:
        reasons.append(
            f"device apiVersion {_fmt(api)} < 1.2: usable with edgepilot's fix (this llama.cpp, from "
            f"`{FIX_COMMAND}`, leaves buffer device addresses off there)"
        )
    elif api[:2] < (1, 2):
        usable = False
        fixable.append(len(reasons))
        reasons.append(
            f"device apiVersion {_fmt(api)} < 1.2: the driver returns NULL for Vulkan 1.2 functions "
            "(vkGetBufferDeviceAddress) that llama.cpp calls -> SIGSEGV at 0x0 (llama.cpp PR #28593, "
            "whisper.cpp #3590)"
        )
        refs += ["llama.cpp#28593", "whisper.cpp#3590"]
    blocked = False
    if storage16 is False:
        usable, blocked = False, True
        reasons.append("no storageBuffer16BitAccess: llama.cpp skips devices without 16-bit storage")
    for issue in KNOWN_ISSUES:
        if not issue.matches(dev):
            continue
        if issue.key == "mali-slower-than-cpu" and any(
            i.key == "mali-g715-device-lost" and i.matches(dev) for i in KNOWN_ISSUES
        ):
            continue
        reasons.append(("known bad: " if issue.blocking else "caveat: ") + issue.text)
        refs += list(issue.refs)
        if issue.blocking:
            usable, blocked = False, True
    if fixable and not blocked:
        reasons[fixable[-1]] += f"; `{FIX_COMMAND}` makes a llama.cpp that runs on it"
    return usable, reasons, refs


def fix_state(
    dev: VulkanDeviceLike,
    api: tuple[int, ...] | None,
    instance: tuple[int, ...] | None,
    storage16: bool | None,
    fixed: bool,
) -> str | None:
    """ "applied", "needed" or None (see FIX_COMMAND above): needed only when the fix would make it usable."""
    below = any(v is not None and v[:2] < (1, 2) for v in (api, instance))
    if not below or is_software(dev):
        return None
    if fixed:
        return "applied"
    return "needed" if judge(dev, api, instance, storage16, fixed=True)[0] is not False else None


def is_software(dev: VulkanDeviceLike) -> bool:
    """A Vulkan driver that runs on the CPU (lavapipe/llvmpipe, SwiftShader) or says it is a CPU."""
    lowered = dev.name.lower()
    kind = (dev.device_type or "").upper()
    return "CPU" in kind or any(s in lowered for s in ("llvmpipe", "lavapipe", "swiftshader"))


def final_verdict(dev: VulkanDeviceLike, listed: bool = True) -> str:
    """One of VERDICTS. `listed`: llama.cpp lists the device (or its list is unknown)."""
    check = getattr(dev, "check", None) or {}
    outcome = check.get("outcome")
    if check.get("ok") is False and outcome in CHECK_CRASHED:
        return "crashed"
    if check.get("ok") is False and outcome in CHECK_FAILED:
        return "failed"
    if is_software(dev):
        return "slow-software"
    if getattr(dev, "vulkan_usable", None) is False:
        return "needs-fix" if getattr(dev, "vulkan_fix", None) == "needed" else "known-bad"
    if not listed:
        return "not-listed"
    if check.get("ok") is True:
        return "usable"
    return "unknown"


def _fmt(version: tuple[int, ...]) -> str:
    return ".".join(str(v) for v in version)
