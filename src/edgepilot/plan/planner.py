"""The planner: predicted memory for candidate settings of one model on one device (and what it needs to know
about both). `fit`, the search and the alternatives all ask it; it imports none of them."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.device import fs
from edgepilot.device.android import AndroidFacts, read_android
from edgepilot.device.cpu import CpuFacts, read_cpu
from edgepilot.device.memory import MemoryFacts, read_memory
from edgepilot.device.process import allowed_cpus
from edgepilot.device.root_archive import open_root
from edgepilot.errors import UserError
from edgepilot.gguf.arch import ArchParams, arch_params
from edgepilot.gguf.gguf_records import GGUFHeader
from edgepilot.gguf.verdict import model_verdict
from edgepilot.plan.arithmetic import EngineArithmetic
from edgepilot.plan.memory_model import Prediction, predict
from edgepilot.plan.requested import default_threads
from edgepilot.plan.settings import CPU_DEVICE, EngineSettings

if TYPE_CHECKING:  # the GPU driver's modules load only for a plan that offloads
    from edgepilot.device.gpu_driver import DriverFacts
    from edgepilot.plan.offload import DriverCosts

CTX_STEP = 256  # llama.cpp pads the context to 256 cells
DEFAULT_UBATCH = 512
THREADS_PER_CPU = 4  # beyond this a thread count is a typo, not an experiment


def check_thread_count(n_threads: int, cpus: int, flag: str = "--threads") -> None:
    """A UserError for a thread count no device of `cpus` CPUs can use (oversubscribed this far, llama.cpp
    only thrashes): run, serve, bench and tune refuse it before any work."""
    cpus = max(1, cpus)
    if n_threads > THREADS_PER_CPU * cpus:
        raise UserError(
            f"{flag} {n_threads} on a device with {cpus} CPUs: use at most {cpus} "
            "(one per big core is fastest)"
        )


@dataclass
class DeviceFacts:
    memory: MemoryFacts
    android: AndroidFacts | None
    cpu: CpuFacts
    live: bool
    allowed_cpus: int | None = None  # CPUs this process may use, when planning for this machine itself
    # the offload devices' drivers, read only when a plan offloads (fit_model): llama.cpp name -> its costs
    drivers: dict[str, DriverCosts] = field(default_factory=dict)

    def default_threads(self) -> int:
        return default_threads(self.cpu, self.allowed_cpus if self.live else None)


def read_device(root: Path | str, gpu: str | None = None) -> DeviceFacts:
    """Only what planning needs: no GPU enumeration (`cmd gpu vkjson` can take seconds on a phone) unless the
    plan offloads to `gpu` (llama.cpp's name): then that device's driver facts (plan/driver_prior.py)."""
    with open_root(Path(root)) as base:
        env, _ = fs.read_env(base)
        android, _ = read_android(base, env)
        live = fs.is_live(base)
        allowed = len(allowed_cpus()) if live else None
        facts = DeviceFacts(read_memory(base), android, read_cpu(base), live, allowed)
        if gpu is not None and gpu != CPU_DEVICE:
            from edgepilot.plan.driver_prior import driver_for

            facts.drivers[gpu] = driver_for(gpu, _driver_facts(base, gpu, android is not None))
        return facts


@functools.lru_cache(maxsize=8)
def _cached_facts(root: Path, gpu: str, android: bool, visible: str | None) -> DriverFacts | None:
    from edgepilot.device.gpu_driver import driver_facts

    return driver_facts(root, gpu, android)


def _driver_facts(root: Path, gpu: str, android: bool) -> DriverFacts | None:
    """vulkaninfo runs once per process and device (tune and serve plan many times)."""
    if not fs.is_live(root):
        from edgepilot.device.gpu_driver import driver_facts

        return driver_facts(root, gpu, android)
    return _cached_facts(root, gpu, android, os.environ.get("GGML_VK_VISIBLE_DEVICES"))


def load_model_facts(model: str | os.PathLike[str]) -> tuple[Path, GGUFHeader, ArchParams]:
    verdict = model_verdict(model, "plan").require()  # the same verdict as inspect and run
    arch = arch_params(verdict.header.metadata)
    arch.notes += verdict.notes  # e.g. a zero-filled tail: the plan holds, but the user must see it
    return verdict.path, verdict.header, arch


class Planner:
    """Predicts memory for candidate settings of one model on one device."""

    def __init__(
        self,
        header: GGUFHeader,
        arch: ArchParams,
        device: DeviceFacts,
        reserve_bytes: int = 0,
        arithmetic: EngineArithmetic | None = None,
    ) -> None:
        """reserve_bytes: resident memory the process holds besides `edgepilot run`'s (serve's HTTP stack).
        arithmetic: the running llama.cpp's differences from the pinned one (plan/arithmetic.py)."""
        self.header, self.arch, self.device = header, arch, device
        self.arithmetic = arithmetic
        self.repack_plan = device.cpu.repack_plan()
        self.reserve_bytes = reserve_bytes
        self._weights = None

    def predict(self, settings: EngineSettings) -> Prediction:
        pred = predict(
            self.header,
            self.arch,
            settings,
            self.repack_plan,
            weights=self._weights,
            arithmetic=self.arithmetic,
            driver=self.device.drivers.get(str(settings.device)),
        )
        self._weights = pred.weights
        if self.reserve_bytes:
            m = pred.memory
            m.runtime_bytes += self.reserve_bytes
            m.peak_rss_bytes += self.reserve_bytes
        return pred

    def peak(self, settings: EngineSettings) -> int:
        return self.predict(settings).memory.peak_rss_bytes

    def max_ctx(self, settings: EngineSettings, budget: int) -> int:
        """Largest context (a multiple of 256, up to the trained context) whose peak fits; 0 if none."""
        hi = max(CTX_STEP, (self.arch.n_ctx_train or 4096) // CTX_STEP * CTX_STEP)
        if self.peak(replace(settings, n_ctx=CTX_STEP)) > budget:
            return 0
        lo_steps, hi_steps = 1, hi // CTX_STEP
        while lo_steps < hi_steps:  # the peak grows with the context: bisect
            mid = (lo_steps + hi_steps + 1) // 2
            if self.peak(replace(settings, n_ctx=mid * CTX_STEP)) <= budget:
                lo_steps = mid
            else:
                hi_steps = mid - 1
        return lo_steps * CTX_STEP
