"""Result types of the memory planner (the JSON contract of `edgepilot fit` in design.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgepilot.errors import UserError
from edgepilot.plan.settings import EngineSettings


@dataclass
class MemoryBreakdown:
    weights_bytes: int  # resident weight pages (mapped file pages with mmap, an anonymous copy without)
    repack_bytes: int  # CPU_REPACK copies of weights re-laid for the CPU's fast path
    kv_bytes: int  # KV cache (and recurrent state) as llama.cpp allocates it
    compute_reserved_bytes: int  # the compute buffer llama.cpp reserves for the worst-case graph
    output_bytes: int  # logits / embeddings output buffer
    runtime_bytes: int  # the process without a model: interpreter, libraries, llama.cpp/ggml runtime
    peak_rss_bytes: int  # predicted peak resident memory of `edgepilot run` when the prompt fills the context
    reserved_bytes: int  # sum of llama.cpp's buffers (what --fit counts): virtual, not all of it resident
    compute_touched_bytes: int = 0  # the part of the compute buffer the run really touches
    # an offloaded run: what each device holds (its model, KV and compute buffers), by llama.cpp's name
    device_bytes: dict[str, int] = field(default_factory=dict)
    driver_bytes: int = 0  # the GPU driver's own memory (libraries, compiled pipelines), in peak_rss_bytes


@dataclass
class Budget:
    budget_bytes: int  # what the plan may use
    available_bytes: int | None  # MemAvailable (or the --budget override)
    margin_bytes: int  # kept free: lmkd / the OOM killer strike before RAM is "full"
    source: str  # "--budget", "MemAvailable", "cgroup limit", ...
    reasons: list[str] = field(default_factory=list)


@dataclass
class Alternative:
    # smaller-context | smaller-quant | smaller-model | kv-quant | smaller-ubatch | no-mmap | no-repack
    kind: str
    description: str
    peak_rss_bytes: int
    fits: bool
    llama_cpp_args: list[str] = field(default_factory=list)


@dataclass
class FitResult:
    model: str
    fits: bool
    budget_bytes: int
    settings: EngineSettings
    memory: MemoryBreakdown
    max_ctx: int  # the largest context that fits the budget with these other settings (0: none)
    llama_cpp_args: list[str]
    edgepilot_args: list[str]
    alternatives: list[Alternative]
    budget: Budget
    notes: list[str] = field(default_factory=list)
    trade_offs: list[str] = field(default_factory=list)  # settings given up to fit, and what each costs
    # the engine the plan is for: {kind, path, version, ...} (engine/choice.py); None when not chosen
    engine: dict[str, Any] | None = None
    # the tuned profile's choices in these settings, one line with its date (None: no profile applied)
    profile: str | None = None
    # what was decided about the GPU and why, said once by run/chat/serve (also in notes)
    gpu_notes: list[str] = field(default_factory=list)


class DoesNotFit(UserError):
    """The planner predicts the OS would kill this run; carries the plan so the CLI can show it."""

    def __init__(self, plan: FitResult) -> None:
        mib = 1 << 20
        super().__init__(
            f"predicted peak memory {plan.memory.peak_rss_bytes / mib:.0f} MiB exceeds the budget of "
            f"{plan.budget_bytes / mib:.0f} MiB: the system would kill this run (use the settings above, "
            "or --force to try anyway)"
        )
        self.plan = plan
