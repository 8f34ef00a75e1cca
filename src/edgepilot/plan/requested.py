"""What the user asked for, and the one default thread count for what they did not."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path

from edgepilot.device.cpu import CpuFacts
from edgepilot.errors import UserError


@dataclass(frozen=True)
class RequestedSettings:
    """What the user asked for on the command line; None = let edgepilot decide."""

    n_ctx: int | None = None
    n_batch: int | None = None
    n_ubatch: int | None = None
    type_k: str | None = None
    type_v: str | None = None
    flash_attn: bool | None = None
    use_mmap: bool | None = None
    n_threads: int | None = None
    n_threads_batch: int | None = None  # prompt processing (None: the tuned profile's, else n_threads)
    repack: bool | None = None  # llama.cpp's CPU_REPACK of weights (None: on, as llama.cpp does)
    profile: bool | None = None  # False: leave the tuned profile out (--no-profile); None: use it if any
    device: str | None = None  # llama.cpp's -dev: "none" (the CPU), a device name, None/"auto": decided
    n_gpu_layers: int | None = None  # ALL_LAYERS for every layer; None: decided (all on a named device)

    @property
    def wants_gpu(self) -> bool:
        """A GPU device or offloaded layers were asked for."""
        return self.device not in (None, "none") or self.n_gpu_layers not in (None, 0)

    @classmethod
    def from_flags(
        cls,
        ctx: int | None = None,
        batch: int | None = None,
        ubatch: int | None = None,
        kv: str | None = None,
        flash_attn: bool | None = None,
        no_mmap: bool = False,
        threads: int | None = None,
        no_repack: bool = False,
        no_profile: bool = False,
        device: str | None = None,
        gpu_layers: str | None = None,
    ) -> RequestedSettings:
        """The command-line flags `run`, `fit` and `serve` share (one --kv sets both K and V)."""
        return cls(
            n_ctx=ctx,
            n_batch=batch,
            n_ubatch=ubatch,
            type_k=kv,
            type_v=kv,
            flash_attn=flash_attn,
            use_mmap=False if no_mmap else None,
            n_threads=threads,
            repack=False if no_repack else None,
            profile=False if no_profile else None,
            device=parse_device(device),
            n_gpu_layers=parse_gpu_layers(gpu_layers),
        )


ALL_LAYERS = -1  # --gpu-layers all: resolved to the model's layers + its output (llama.cpp's n_layer + 1)
AUTO = "auto"
_DEVICE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.:\[\]-]{0,63}")


def parse_device(text: str | None) -> str | None:
    """--device NAME|none|auto (llama.cpp's names: Vulkan0, OpenCL0 ...; `llama-server --list-devices`)."""
    if text is None or text.strip().lower() == AUTO:
        return None
    name = text.strip()
    if name.lower() == "none":
        return "none"
    if "," in name:
        raise UserError(f"--device {text!r}: edgepilot offloads to one device; name one, e.g. Vulkan0")
    if not _DEVICE_NAME.fullmatch(name) or name.upper() == "CPU":
        raise UserError(
            f"--device {text!r}: write none (the CPU), auto, or a device llama.cpp lists, e.g. Vulkan0 "
            "(`edgepilot probe` shows them)"
        )
    return name


def parse_gpu_layers(text: str | None) -> int | None:
    """--gpu-layers N|all|auto."""
    if text is None or text.strip().lower() == AUTO:
        return None
    value = text.strip().lower()
    if value == "all":
        return ALL_LAYERS
    if not (value.isascii() and value.isdigit()) or len(value) > 7:
        raise UserError(f"--gpu-layers {text!r}: write a number of layers (0 or more), all, or auto")
    return int(value)


def _set_fields(r: RequestedSettings) -> dict[str, object]:
    return {f.name: getattr(r, f.name) for f in fields(r) if getattr(r, f.name) is not None}


def merged(base: RequestedSettings, *overrides: RequestedSettings | None) -> RequestedSettings:
    """base with every field an override sets (later overrides win)."""
    for over in overrides:
        if over is not None:
            base = replace(base, **_set_fields(over))
    return base


def as_requested(settings: object) -> RequestedSettings:
    """Every field of an EngineSettings that a request can carry: 'run exactly these' (no profile)."""
    names = [f.name for f in fields(RequestedSettings) if hasattr(settings, f.name)]
    carried = {name: getattr(settings, name) for name in names}
    return RequestedSettings(**{**carried, "profile": False})


def default_threads(cpu: CpuFacts, allowed_cpus: int | None) -> int:
    """One thread per big core: little cores stall the big ones at every barrier (references.md).

    allowed_cpus: how many CPUs this process may use when planning for this machine (None for a device tree);
    then also no more than its physical cores (SMT siblings share one core's units)."""
    big = len(cpu.big_cores) or cpu.cores or 1
    if allowed_cpus is None:
        return max(1, big)
    physical = physical_cores() or allowed_cpus
    return max(1, min(big, physical, allowed_cpus))


def physical_cores(root: Path = Path("/")) -> int | None:
    """Cores, not hardware threads: CPUs that share a core (SMT siblings) count once. From sysfs, as
    psutil.cpu_count(logical=False) reads it on Linux, without importing psutil (fit's start-up budget)."""
    base = root / "sys/devices/system/cpu"
    cores: set[str] = set()
    try:
        for cpu in base.glob("cpu[0-9]*/topology"):
            for name in ("core_cpus_list", "thread_siblings_list"):
                with contextlib.suppress(OSError, UnicodeDecodeError):
                    cores.add((cpu / name).read_text()[:256].strip())
                    break
    except OSError:
        return None
    return len(cores) or None
