"""The one settings decision: the user's flags + the device + the model + its tuned profile → settings + plan.

`fit`, `run`, `serve`, `bench` and `tune` all decide here, so `edgepilot fit MODEL` shows what
`edgepilot run MODEL` will use. The memory planner (plan.fit) picks what fits the budget; the profile `tune`
saved fills in the speed choices the user left open; memory comes first.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.defaults import DEFAULT_CTX
from edgepilot.device.cpusets import cpulist
from edgepilot.device.process import allowed_cpus
from edgepilot.engine.choice import EngineInfo
from edgepilot.plan.commands import llama_cpp_command
from edgepilot.plan.fit import fit_model
from edgepilot.plan.requested import RequestedSettings
from edgepilot.plan.settings import EngineSettings
from edgepilot.plan.types import FitResult
from edgepilot.tuned import pinning
from edgepilot.tuned.profiles import Profile, load_profile
from edgepilot.words import count

if TYPE_CHECKING:
    from collections.abc import Callable

    from edgepilot.engine.speculation import Speculation
    from edgepilot.gguf.arch import ArchParams
    from edgepilot.plan.arithmetic import EngineArithmetic

# The context when none is asked for: enough for a conversation, without reserving the whole trained context
# (its KV cache is cleared at creation, so every cell costs resident memory). A longer prompt raises it.
RUN_CTX = DEFAULT_CTX


@dataclass
class Decision:
    plan: FitResult  # the settings (plan.settings) and their predicted memory
    profile: Profile | None  # the tuned profile that filled in speed choices, if any
    cpus: list[int] | None = None  # the profile's CPUs for generation: pinned before the model loads
    prompt_cpus: list[int] | None = None  # the profile's CPUs for prompt processing, when they differ
    speculation_note: str | None = None  # what --lookup / --draft added to the plan (also in plan.notes)

    @property
    def settings(self) -> EngineSettings:
        return self.plan.settings

    def pin(self) -> pinning.PhasePinning | None:
        """Pin this process to the generation CPUs (threads created later inherit them); returns the engine's
        hook that re-pins for prompt processing when those CPUs differ, else None."""
        if not self.cpus:
            return None
        pinning.pin_process(self.cpus)
        return pinning.PhasePinning(self.prompt_cpus, self.cpus) if self.prompt_cpus else None


def apply_profile(requested: RequestedSettings, profile: Profile | None) -> RequestedSettings:
    """The request with the profile's speed choices filled in where the user gave none. The prompt's thread
    count comes with the profile's thread count only: threads the user chose are used for both phases."""
    if profile is None:
        return requested
    own_threads = requested.n_threads is not None
    return replace(
        requested,
        n_threads=requested.n_threads if own_threads else profile.n_threads,
        n_threads_batch=requested.n_threads_batch
        if requested.n_threads_batch is not None or own_threads
        else profile.n_threads_batch,
        n_ubatch=requested.n_ubatch if requested.n_ubatch is not None else profile.n_ubatch,
        flash_attn=requested.flash_attn if requested.flash_attn is not None else profile.flash_attn,
        repack=requested.repack if requested.repack is not None else (None if profile.repack else False),
    )


def tuned_cpus(
    requested: RequestedSettings, profile: Profile | None
) -> tuple[list[int] | None, list[int] | None]:
    """The profile's CPUs this process may use: (generation, prompt processing when tune found other CPUs for
    it); (None, None) when there is no profile, the user chose the thread count, or none is usable."""
    if profile is None or requested.n_threads is not None:
        return None, None
    allowed = allowed_cpus()
    gen = profile.usable_cpus(allowed)
    if not gen:
        return None, None
    prompt = [c for c in profile.prompt_cpus if c in allowed]
    return gen, (prompt if prompt and prompt != gen else None)


def _profile_note(
    settings: EngineSettings, requested: RequestedSettings, profile: Profile, prompt_cpus: list[int] | None
) -> str | None:
    used = []
    if requested.n_threads is None:
        text = f"{count(settings.n_threads, 'thread')} on CPUs {cpulist(profile.cpus)}"
        if prompt_cpus:
            text += f" (prompt: {settings.n_threads_batch} on CPUs {cpulist(prompt_cpus)})"
        used.append(text)
    if requested.n_ubatch is None:
        used.append(f"ubatch {settings.n_ubatch}")
    if requested.flash_attn is None:
        used.append(f"flash attention {'on' if settings.flash_attn else 'off'}")
    if requested.device is None and not settings.on_cpu:
        layers = count(settings.n_gpu_layers, "layer")
        used.append(f"{settings.device} with {layers} (faster than the CPU here)")
    if requested.repack is None and not profile.repack:
        used.append("no weight repacking (it bought no speed here)")
    if not used:
        return None
    kind = " (chosen by sustained speed)" if profile.chosen_by == "sustained" else ""
    head = f"tuned profile of {profile.created[:10]}{kind}: "
    return head + ", ".join(used) + " (--no-profile leaves it out)"


def gpu_notes(settings: EngineSettings, requested: RequestedSettings, engine: EngineInfo | None) -> list[str]:
    """What the driver checks edgepilot remembers say about this run (no driver is loaded to find out)."""
    if engine is None or engine.kind != "tools" or not engine.path:
        return []
    from edgepilot.engine.gpu_check import checks_for

    checks = checks_for(Path(engine.path))
    failed = [c for c in checks if c.ok is False]
    if not settings.on_cpu:
        from edgepilot.device.gpu_verdict import known_blocking

        bad = next((c for c in failed if c.device == settings.device), None)
        if bad is not None:
            return [f"{bad.device}: {bad.detail}; llama.cpp may crash there (--device none runs on the CPU)"]
        this = next((c for c in checks if c.device == settings.device), None)
        issue = known_blocking(this.description) if this is not None else None
        if issue is not None:
            first, refs = issue.text.split(": ")[0], ", ".join(issue.refs[:2])
            return [f"{settings.device} is known bad: {first} ({refs}); --device none runs on the CPU"]
        return []
    notes = [f"{c.device}: {c.detail}; its driver is kept out of this CPU run" for c in failed[:1]]
    good = [c.device for c in checks if c.ok]
    if good and requested.device is None:
        notes.append(
            f"{', '.join(good)} passed the driver check; auto stays on the CPU until `edgepilot tune` "
            "measures the GPU faster (--device NAME uses it now)"
        )
    return notes


def _learned_arithmetic(
    engine: EngineInfo | None, path: Path
) -> Callable[[ArchParams], EngineArithmetic | None] | None:
    """What fit_model applies for another llama.cpp (tuned/calibrate.py); None for the pinned in-process one,
    which has nothing learned, so the calibration modules stay unloaded."""
    if engine is None or engine.kind != "tools":
        return None

    def learned(arch: ArchParams) -> EngineArithmetic | None:
        from edgepilot.tuned.calibrate import arithmetic_for

        return arithmetic_for(engine, path, arch)

    return learned


def decide(
    model_path: str | os.PathLike[str],
    requested: RequestedSettings | None = None,
    *,
    root: str | Path = "/",
    budget_bytes: int | None = None,
    ctx_needed: int = 0,
    reserve_bytes: int = 0,
    profile: Profile | None = None,
    use_profile: bool = True,
    engine: EngineInfo | None = None,
    own_process: bool | None = None,
    sustained: bool = False,
    opencl: bool = False,
    speculation: Speculation | None = None,
) -> Decision:
    """Settings and plan for one model on the device at `root`.

    ctx_needed: tokens the caller knows it needs (prompt + reply); the context is at least that, at least
    RUN_CTX, at most what fits. reserve_bytes: memory the process needs besides a run's (serve's HTTP stack).
    profile: the tuned profile to use; by default the one `tune` stored for this model and device.
    engine: the engine that will run it: the plan is for its llama.cpp (tuned/calibrate.py).
    own_process: whether the model runs in this process (plan.fit.fit_model; None: in-process engines do).
    sustained: prefer the profile `tune --sustained` saved (serve: a server runs for hours).
    opencl: also plan the OpenCL GPU path (`fit` asks; plan/opencl_plan.py).
    speculation: --lookup / --draft: planned again with what it adds at the settings first chosen (a draft
    model, the verify batch's logits rows), said in plan.notes and in Decision.speculation_note.
    """
    requested = requested or RequestedSettings()
    path = Path(model_path)
    if profile is None and use_profile and requested.profile is not False:
        profile = load_profile(path, Path(root), sustained=sustained)
    tuned = apply_profile(requested, profile)
    offload_note = None
    if profile is not None and profile.offload_device != "none" and requested.device is None:
        if engine is not None and engine.kind == "inprocess":
            offload_note = (
                f"the tuned profile's {profile.offload_device} (-ngl {profile.n_gpu_layers}) is left out: "
                "the in-process engine is CPU-only (`--engine tools` uses it)"
            )
        elif requested.n_gpu_layers is None:
            tuned = replace(tuned, device=profile.offload_device, n_gpu_layers=profile.n_gpu_layers)
    if engine is not None and engine.no_repack and tuned.repack is None:  # it crashed repacked here
        tuned = replace(tuned, repack=False)
    ctx_target = max(RUN_CTX, ctx_needed)

    def plan_for(req: RequestedSettings, reserve: int) -> FitResult:
        return fit_model(
            path,
            req,
            budget_bytes=budget_bytes,
            root=root,
            ctx_target=ctx_target,
            reserve_bytes=reserve,
            arithmetic=_learned_arithmetic(engine, path),
            own_process=own_process,
            opencl=opencl,
        )

    def settled(reserve: int) -> FitResult:
        plan = plan_for(tuned, reserve)
        if not plan.fits and tuned.n_ubatch != requested.n_ubatch:  # memory first: the planner's ubatch
            plan = plan_for(replace(tuned, n_ubatch=requested.n_ubatch), reserve)
        return plan

    plan = settled(reserve_bytes)
    speculation_note = None
    if speculation is not None:
        from edgepilot.engine.speculation import extra_note, planned_extra_bytes

        extra = planned_extra_bytes(path, plan.settings, speculation, root, plan.memory.compute_touched_bytes)
        plan = settled(reserve_bytes + extra)
        # a smaller context touches less of its compute buffer, so the verify graph's result may cost more
        again = planned_extra_bytes(path, plan.settings, speculation, root, plan.memory.compute_touched_bytes)
        if again > extra:
            extra = again
            plan = settled(reserve_bytes + extra)
        speculation_note = extra_note(speculation, extra)
    cpus, prompt_cpus = tuned_cpus(requested, profile)
    if cpus:
        plan.llama_cpp_args = llama_cpp_command(path, plan.settings, cpus=cpus, prompt_cpus=prompt_cpus)
    if profile is not None:
        plan.profile = _profile_note(plan.settings, requested, profile, prompt_cpus)
        if plan.profile:
            plan.notes.append(plan.profile)
    plan.gpu_notes = ([offload_note] if offload_note else []) + gpu_notes(plan.settings, requested, engine)
    plan.notes += plan.gpu_notes
    if engine is not None and engine.cpu_note:
        plan.engine_notes = [engine.cpu_note]
        plan.notes += plan.engine_notes
    if engine is not None:
        plan.engine = asdict(engine)
    if speculation_note:
        plan.notes.append(speculation_note)
    return Decision(plan, profile, cpus, prompt_cpus, speculation_note)
