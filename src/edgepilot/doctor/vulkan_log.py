"""What a llama.cpp log says about its Vulkan devices: the `ggml_vulkan: N = ...` lines, the buffers put on
each device, `common_memory_breakdown_print` rows, vulkaninfo's device blocks, and llama-bench rows with a
`dev` column. Tolerant like logscan: a line that does not parse is skipped."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from edgepilot.doctor.logscan import bench_table_row, quote
from edgepilot.engine.load_log import BUFFER, USING_DEVICE  # llama.cpp's buffer lines: one reader

_DEVICE = re.compile(r"ggml_vulkan: (\d+) = (.+) \(([^()]*)\) \| uma: (\d)")
_BREAKDOWN = re.compile(
    r"\|\s*-\s*(Vulkan\d+) \((.*)\)\s*\|\s*(\d+)\s*=\s*(\d+)\s*\+\s*\(\s*(\d+)\s*=\s*(\d+)\s*\+\s*(\d+)\s*"
    r"\+\s*(\d+)\s*\)\s*\+\s*(-?\d+)"
)
_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_VKINFO_API = re.compile(r"^\s*apiVersion\s*=\s*(\d+)\.(\d+)(?:\.\d+)?")
# the value to the end of the line, stripped after: `(.+?)\s*$` was quadratic in a run of spaces
_VKINFO_NAME = re.compile(r"^\s*deviceName\s*=(.*)")


@dataclass
class VkDevice:
    index: int
    name: str
    driver: str
    uma: bool
    line: str


@dataclass
class Buffer:
    device: str  # Vulkan0, Vulkan_Host
    kind: str  # model, KV, compute, output
    mib: float
    line: str


@dataclass
class Breakdown:
    """A `common_memory_breakdown_print` row:
    total = free + (self = model + context + compute) + unaccounted (MiB)."""

    device: str
    name: str
    total: int
    free: int
    self_mib: int
    model: int
    context: int
    compute: int
    line: str


@dataclass
class ApiFact:
    """A device apiVersion read from vulkaninfo output in the log."""

    name: str
    major: int
    minor: int
    line: str


@dataclass
class BenchCell:
    dev: str  # llama-bench's `dev` column: none, Vulkan0, ... ("" when absent)
    ngl: int | None
    test: str  # pp512, tg128
    tps: float
    line: str


@dataclass
class VulkanLog:
    devices: list[VkDevice] = field(default_factory=list)
    using: list[str] = field(default_factory=list)  # `using device Vulkan0 (NAME)` lines
    buffers: list[Buffer] = field(default_factory=list)
    breakdown: list[Breakdown] = field(default_factory=list)
    offloaded: str | None = None  # the `offloaded N/M layers to GPU` line
    offloaded_layers: tuple[int, int] | None = None
    api: list[ApiFact] = field(default_factory=list)
    bench: list[BenchCell] = field(default_factory=list)

    def gpu_buffers(self) -> list[Buffer]:
        """The buffers on a Vulkan device (not the host-visible staging ones), last load only."""
        last: dict[tuple[str, str], Buffer] = {}
        for b in self.buffers:
            if b.device != "Vulkan_Host":
                last[(b.device, b.kind)] = b
        return list(last.values())

    def old_api(self) -> list[ApiFact]:
        return [a for a in self.api if (a.major, a.minor) < (1, 2)]


def read_vulkan(lines: list[str]) -> VulkanLog:
    out = VulkanLog()
    header: list[str] | None = None
    for line in lines:
        if m := _DEVICE.search(line):
            index, name, driver = int(m.group(1)), m.group(2), m.group(3)
            short = quote(
                line[: m.end()]
            )  # the name, driver and uma; the feature list is noise at 50 columns
            out.devices.append(VkDevice(index, name, driver, m.group(4) == "1", short))
        elif (m := USING_DEVICE.search(line)) and m.group(1).startswith("Vulkan"):
            out.using.append(quote(line))
        elif (m := BUFFER.search(line)) and m.group(1).startswith("Vulkan"):
            out.buffers.append(Buffer(m.group(1), m.group(2), float(m.group(3)), quote(line)))
        elif m := _BREAKDOWN.search(line):
            nums = [int(x) for x in m.groups()[2:8]]
            out.breakdown.append(Breakdown(m.group(1), m.group(2), *nums, line=quote(line)))
        elif m := _OFFLOADED.search(line):
            out.offloaded, out.offloaded_layers = quote(line), (int(m.group(1)), int(m.group(2)))
        elif m := _VKINFO_API.match(line):
            out.api.append(ApiFact("", int(m.group(1)), int(m.group(2)), quote(line)))
        elif (m := _VKINFO_NAME.match(line)) and m.group(1).strip() and out.api and not out.api[-1].name:
            out.api[-1].name = m.group(1).strip()  # vulkaninfo --summary prints deviceName after apiVersion
        header = _bench_line(line, header, out.bench)
    return out


def _bench_line(line: str, header: list[str] | None, rows: list[BenchCell]) -> list[str] | None:
    header, row = bench_table_row(line, header)
    if row is None:
        return header
    try:
        tps = float(row["t/s"].split()[0])
        ngl = int(row["ngl"]) if row.get("ngl", "").isdigit() else None
    except (KeyError, ValueError, IndexError):
        return header
    rows.append(BenchCell(row.get("dev", ""), ngl, row.get("test", "?"), tps, quote(line)))
    return header
