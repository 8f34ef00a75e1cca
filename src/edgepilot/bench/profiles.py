"""Tuned settings per (device, model), saved by `tune` and picked up by `run` and `serve`.

One JSON file per pair: <data dir>/profiles/<model key>@<device fingerprint>.json. Looking one up costs
hashing 2 MiB of the model; the device is only probed when a profile for the model exists at all.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from edgepilot.bench.identity import device_id, model_id
from edgepilot.bench.ranges import cpulist
from edgepilot.bench.store import data_dir
from edgepilot.errors import UserError

if TYPE_CHECKING:
    from edgepilot.bench.pinning import PhasePinning
    from edgepilot.plan.requested import RequestedSettings
    from edgepilot.plan.types import FitResult

PROFILE_VERSION = 1


@dataclass
class Profile:
    device_fingerprint: str
    device: str
    model_key: str
    model_name: str
    model_size: int
    n_threads: int  # generation
    n_threads_batch: int  # prompt processing
    cpus: list[int]  # the process is pinned to these before the model loads
    n_ubatch: int
    flash_attn: bool
    gen_tps: float  # what tune measured with these settings
    prompt_tps: float
    created: str
    n_prompt: int = 0  # the test sizes tune measured with
    n_gen: int = 0
    prompt_cpus: list[int] = field(default_factory=list)  # prompt processing's CPUs (empty: `cpus`)
    version: int = PROFILE_VERSION
    notes: list[str] = field(default_factory=list)

    def usable_cpus(self, allowed: list[int]) -> list[int]:
        """The profile's CPUs this process may use (taskset or a cgroup may have narrowed them since)."""
        return [c for c in self.cpus if c in allowed]


def profiles_dir() -> Path:
    return data_dir() / "profiles"


def profile_path(model_key: str, device_fp: str) -> Path:
    return profiles_dir() / f"{model_key}@{device_fp}.json"


def save_profile(profile: Profile) -> Path:
    path = profile_path(profile.model_key, profile.device_fingerprint)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(profile), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(
            f"cannot save the profile to {path}: {exc.strerror or exc}; set EDGEPILOT_DATA_DIR"
        ) from None
    return path


def read_profile(path: Path) -> Profile | None:
    """A profile file, or None if it is unreadable, from another version or damaged (never an error)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != PROFILE_VERSION:
        return None
    known = {f.name for f in fields(Profile)}
    try:
        profile = Profile(**{k: v for k, v in data.items() if k in known})
    except TypeError:
        return None
    ok = (
        isinstance(profile.n_threads, int)
        and profile.n_threads >= 1
        and isinstance(profile.n_threads_batch, int)
        and profile.n_threads_batch >= 1
        and isinstance(profile.n_ubatch, int)
        and profile.n_ubatch >= 1
        and isinstance(profile.cpus, list)
        and all(isinstance(c, int) and c >= 0 for c in profile.cpus)
        and isinstance(profile.prompt_cpus, list)
        and all(isinstance(c, int) and c >= 0 for c in profile.prompt_cpus)
    )
    return profile if ok else None


def load_profile(model_path: Path | str, root: Path = Path("/")) -> Profile | None:
    """The tuned profile for this model on this device, or None (no tune yet, other device, damaged file)."""
    path = Path(model_path)
    folder = profiles_dir()
    if not folder.is_dir():
        return None
    try:
        key = model_id(path).key
    except UserError:
        return None
    candidates: list[Path] = []
    with contextlib.suppress(OSError):
        candidates = sorted(folder.glob(f"{key}@*.json"))
    if not candidates:
        return None
    fingerprint = device_id(root).fingerprint
    match = profile_path(key, fingerprint)
    return read_profile(match) if match in candidates else None


def apply_profile(requested: RequestedSettings, profile: Profile | None) -> RequestedSettings:
    """The request with the profile's speed choices filled in where the user gave none."""
    if profile is None:
        return requested
    return replace(
        requested,
        n_threads=requested.n_threads if requested.n_threads is not None else profile.n_threads,
        n_ubatch=requested.n_ubatch if requested.n_ubatch is not None else profile.n_ubatch,
        flash_attn=requested.flash_attn if requested.flash_attn is not None else profile.flash_attn,
    )


def finish_with_profile(plan: FitResult, requested: RequestedSettings, profile: Profile | None) -> FitResult:
    """Prompt-processing threads from the profile (when the thread count is the profile's too), and a note."""
    if profile is None:
        return plan
    if requested.n_threads is None:
        plan.settings = replace(plan.settings, n_threads_batch=profile.n_threads_batch)
    prompt_cpus = profile.prompt_cpus if profile.prompt_cpus and profile.prompt_cpus != profile.cpus else None
    used = [
        f"{plan.settings.n_threads} thread(s) on CPUs {cpulist(profile.cpus)}"
        + (
            f" (prompt: {plan.settings.n_threads_batch} on CPUs {cpulist(prompt_cpus)})"
            if prompt_cpus
            else ""
        )
        if requested.n_threads is None
        else "",
        f"ubatch {plan.settings.n_ubatch}" if requested.n_ubatch is None else "",
        f"flash attention {'on' if plan.settings.flash_attn else 'off'}"
        if requested.flash_attn is None
        else "",
    ]
    if any(used):
        plan.notes.append(f"tuned profile of {profile.created[:10]}: " + ", ".join(u for u in used if u))
    return plan


def tuned_cpus(
    requested: RequestedSettings, profile: Profile | None
) -> tuple[list[int], list[int] | None] | None:
    """The profile's CPUs this process may use: (generation, prompt processing when tune found other CPUs for
    it, else None); None when there is no profile, the user chose the thread count, or none is usable."""
    from edgepilot.bench.pinning import allowed_cpus

    if profile is None or requested.n_threads is not None:
        return None
    allowed = allowed_cpus()
    gen = profile.usable_cpus(allowed)
    if not gen:
        return None
    prompt = [c for c in profile.prompt_cpus if c in allowed]
    return gen, (prompt if prompt and prompt != gen else None)


def pin_for_profile(requested: RequestedSettings, profile: Profile | None) -> PhasePinning | None:
    """Pin this process to the profile's generation CPUs (threads created later inherit them) unless the user
    chose the thread count. Returns the engine's hook that re-pins for prompt processing when the profile
    gives it other CPUs, else None."""
    from edgepilot.bench.pinning import PhasePinning, pin_process

    tuned = tuned_cpus(requested, profile)
    if tuned is None:
        return None
    gen, prompt = tuned
    pin_process(gen)
    return PhasePinning(prompt, gen) if prompt else None
