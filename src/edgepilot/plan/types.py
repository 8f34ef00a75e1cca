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
    compute_touched_bytes: int = 0  # the part of the compute buffer the run really touches (<= reserved)
    compute_work_bytes: int = 0  # the CPU backend's work buffer, outside the reserve (plan/compute.py)
    # an offloaded run: what each device holds (its model, KV and compute buffers), by llama.cpp's name
    device_bytes: dict[str, int] = field(default_factory=dict)
    driver_bytes: int = 0  # the GPU driver's own memory (libraries, compiled pipelines), in peak_rss_bytes


@dataclass
class Budget:
    """The most the run's whole process may hold (the plan's peak is the whole process): what is free, plus
    this process when the plan counts it (it is the run, or the run replaces it), minus a margin."""

    budget_bytes: int  # what the plan may use
    available_bytes: int | None  # budget + margin: what the run's process could hold (or the override)
    margin_bytes: int  # kept free: lmkd / the OOM killer strike before RAM is "full"
    source: str  # "--budget", "MemAvailable", "cgroup limit", ...
    reasons: list[str] = field(default_factory=list)
    mem_available_bytes: int | None = None  # MemAvailable as read (or its estimate)
    own_bytes: int = 0  # this process, given back to the run: in the plan's peak, not taken from the budget
    limit_bytes: int | None = None  # the cgroup limit, when it is the tighter figure
    usage_bytes: int | None = None  # that cgroup's usage: own_bytes + page_cache_bytes + others_bytes
    page_cache_bytes: int = 0  # its inactive file pages: the kernel reclaims them before it kills
    others_bytes: int = 0  # the rest of its usage: other processes, active page cache, kernel memory
    account: str = ""  # one line that adds up on screen: "budget 131.9 MiB = cgroup limit 150.0 − ..."
    # the account in pieces a renderer may wrap between (never inside one)
    account_terms: list[str] = field(default_factory=list, metadata={"json": False})


@dataclass
class Alternative:
    # smaller-context | smaller-quant | smaller-model | kv-quant | smaller-ubatch | no-mmap | no-repack |
    # llama-completion (llama.cpp's own program, without the interpreter of the in-process engine)
    kind: str
    description: str
    peak_rss_bytes: int
    fits: bool
    llama_cpp_args: list[str] = field(default_factory=list)


@dataclass
class OffloadPlan:
    """The run with every layer on the OpenCL device, at the plan's context."""

    device: str  # llama.cpp's name: GPUOpenCL
    n_gpu_layers: int
    peak_rss_bytes: int
    fits: bool
    device_bytes: int  # what the device holds (weights, KV, compute): the phone's RAM (UMA)
    max_ctx: int  # the largest context that fits so offloaded
    llama_cpp_args: list[str] = field(default_factory=list)
    edgepilot_args: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the estimate assumes (the driver's memory)


@dataclass
class OpenCLAdvice:
    """fit's `opencl`: the OpenCL device, the model's weight types on it, the offloaded run, the fix."""

    device: str  # "QUALCOMM Adreno(TM) 750"
    verdict: str  # ggml-opencl's: supported | not-supported | unknown
    reasons: list[str] = field(default_factory=list)
    fast_types: list[str] = field(default_factory=list)
    # the model's matrix weights by type: {"Q4_K": {"bytes": N, "speed": "slower"}} (fast | slower | cpu)
    weight_types: dict[str, dict[str, int | str]] = field(default_factory=dict)
    fast: bool = False  # every matrix weight is of a type the kernels are fast for
    slower_share: float = 0.0  # of the matrix weights' bytes, the part in slower or CPU-only types
    recommended_quant: str | None = None
    requantize_out: str | None = None  # the file the commands below write
    llama_quantize_args: list[str] = field(default_factory=list)  # the copy-pasteable fix
    edgepilot_quantize_args: list[str] = field(default_factory=list)  # the same through edgepilot
    offload: OffloadPlan | None = None


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
    # what the CPU check of the engine's llama.cpp decided (it runs without repacking, or on the other
    # engine), said once by run/chat/serve (also in notes)
    engine_notes: list[str] = field(default_factory=list)
    # the context the model was trained on: max_ctx is searched up to it (None: the GGUF does not say)
    n_ctx_train: int | None = None
    # when no context fits these settings: how far the smallest one (256 cells) is over the budget
    shortfall_bytes: int = 0
    # what the context asks of the model and llama.cpp (above its trained context, rounded up), said by
    # fit/run/chat/serve (also in notes; plan/context_limits.py)
    warnings: list[str] = field(default_factory=list)
    # `fit` on a device with an OpenCL GPU (an Adreno): the offloaded run and the weight types its kernels
    # are fast for, with the requantization when the model's are not (plan/opencl_plan.py); None otherwise
    opencl: OpenCLAdvice | None = None


SETTING_KINDS = ("smaller-context", "kv-quant", "smaller-ubatch", "no-mmap", "no-repack")
MIB = 1 << 20


def shown_shortfall(plan: FitResult) -> int:
    """How far the smallest plan is over the budget as the refusal prints it (to 0.1 MiB): the two figures
    a reader sees add up, and the doctor, which reads the printed budget back, names the same shortfall."""
    shown_budget = int(float(f"{plan.budget_bytes / MIB:.1f}") * MIB)
    return max(0, plan.shortfall_bytes + plan.budget_bytes - shown_budget)


def nearest_fit(plan: FitResult) -> str:
    """What is true about fitting when the plan does not: the nearest setting that fits (the planner's
    alternatives, cheapest kind first), or that nothing does and by how much."""
    s = plan.settings
    if 0 < plan.max_ctx < s.n_ctx:
        return f"--ctx {plan.max_ctx} fits (the largest context that does)"
    # the same model first (its settings, then llama.cpp's own program), then a smaller quantization; a
    # model of some smaller size is no setting to name
    order = [*SETTING_KINDS, "llama-completion", "smaller-quant"]
    fitting = [a for a in plan.alternatives if a.fits and a.kind in order]
    option = min(fitting, key=lambda a: order.index(a.kind), default=None)
    nothing = (
        f"nothing fits at any context with these settings ({shown_shortfall(plan) / MIB:.1f} MiB over at "
        "context 256)"
        if plan.shortfall_bytes
        else "nothing fits"
    )
    if option is None:
        return nothing
    peak = f"peak {option.peak_rss_bytes / MIB:.1f} MiB"
    if option.kind in SETTING_KINDS:
        return f"{option.description} fits ({peak})"
    return f"{nothing}; nearest that fits: {option.description} ({peak})"


class DoesNotFit(UserError):
    """The planner predicts the OS would kill this run; carries the plan so the CLI can show it."""

    def __init__(self, plan: FitResult) -> None:
        super().__init__(
            f"predicted peak memory {plan.memory.peak_rss_bytes / MIB:.1f} MiB exceeds the budget of "
            f"{plan.budget_bytes / MIB:.1f} MiB: the system would kill this run; {nearest_fit(plan)} "
            "(--force tries anyway)"
        )
        self.plan = plan
