"""Who measured what: a device fingerprint and a model key, cheap enough to compute on every `run`."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from edgepilot.device.cpu import CpuFacts, read_cpu
from edgepilot.device.cpusets import cpulist
from edgepilot.device.fs import read_text
from edgepilot.device.memory import parse_meminfo
from edgepilot.digest import sha256_hex
from edgepilot.errors import UserError

EDGE_BYTES = 1 << 20  # bytes hashed at each end of a model file


@dataclass(frozen=True)
class DeviceId:
    fingerprint: str  # 16 hex digits
    description: str  # "AMD EPYC · 2 cores" / "Cortex-X3 1×3187 + Cortex-A715 2×2803 + ..."


@dataclass(frozen=True)
class ModelId:
    key: str  # 16 hex digits
    name: str
    size: int
    path: str


@dataclass(frozen=True)
class MeasuredModel:
    """A model as a bench or tune report names it: its identity and what llama.cpp said of it."""

    key: str
    name: str
    size: int
    path: str
    type: str = ""  # llama.cpp's description, e.g. "gemma3 270M Q4_K - Medium"
    n_params: int = 0

    @classmethod
    def of(cls, model: ModelId, type: str = "", n_params: int = 0) -> MeasuredModel:
        return cls(model.key, model.name, model.size, model.path, type, n_params)


def describe_cpu(cpu: CpuFacts) -> str:
    parts = [
        f"{len(cl.cpus)}×{cl.core or '?'}" + (f" {cl.max_mhz} MHz" if cl.max_mhz else "")
        for cl in cpu.clusters
    ]
    return " + ".join(parts) or f"{cpu.cores} cores"


def device_id(root: Path = Path("/"), cpu: CpuFacts | None = None) -> DeviceId:
    """The CPU layout, core types, clock limits and memory size: what makes settings carry over.

    Two phones of the same model share a fingerprint on purpose; a kernel update that changes nothing here
    keeps the profile valid.
    """
    cpu = cpu or read_cpu(root)
    meminfo, _ = read_text(root, "proc/meminfo")
    total = parse_meminfo(meminfo or "").get("MemTotal", 0)
    facts = {
        "arch": cpu.arch,
        "model": cpu.model_name or cpu.hardware,
        "clusters": [[cpulist(cl.cpus), cl.core, cl.max_mhz] for cl in cpu.clusters],
        "mem_gib": round(total / (1 << 30)),  # whole GiB: MemTotal moves a little between boots
    }
    digest = sha256_hex(json.dumps(facts, sort_keys=True))[:16]
    head = cpu.hardware or cpu.model_name or cpu.arch or "unknown CPU"
    layout = f"{cpu.cores} cores" if len(cpu.clusters) <= 1 else describe_cpu(cpu)
    return DeviceId(digest, f"{head} · {layout}")


def model_id(path: Path) -> ModelId:
    """Name + size + sha256 of the first and last MiB: a renamed copy keeps its key, a re-quantized file not.

    Hashing a whole multi-GiB model would cost seconds on every `run`.
    """
    import hashlib  # OpenSSL's sha256: 2 MiB are hashed here (digest.py keeps it off the other commands)

    try:
        size = path.stat().st_size
        h = hashlib.sha256(str(size).encode())
        with open(path, "rb") as f:
            h.update(f.read(EDGE_BYTES))
            if size > 2 * EDGE_BYTES:
                f.seek(size - EDGE_BYTES)
            h.update(f.read(EDGE_BYTES))
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    return ModelId(h.hexdigest()[:16], path.name, size, str(path.resolve() if path.exists() else path))


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for pkg in ("edgepilot", "llama-cpp-python"):
        try:
            found[pkg] = version(pkg)
        except PackageNotFoundError:
            found[pkg] = "unknown"
    found["python"] = ".".join(map(str, sys.version_info[:3]))
    return found
