"""Tuned settings per (device, model), saved by `tune` and used by the settings decision (decide.py).

One JSON file per pair: <data dir>/profiles/<model key>@<device fingerprint>.json, and beside it
<...>.sustained.json when `tune --sustained` chose settings by the speed they hold: serve, which runs for
hours, prefers that one; run, chat and fit prefer the burst one (either serves when it is the only one).
Looking one up costs hashing 2 MiB of the model; the device is only probed when a profile for the model
exists at all.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from edgepilot.datadir import DATA_FIX, data_dir, writable_data_folder
from edgepilot.errors import UserError
from edgepilot.file_errors import cannot_read, escaped, is_denied, note_once, reason, refused_where
from edgepilot.kept import MAX_BYTES, MAX_COUNT, Dropped, is_int, is_number, read_json
from edgepilot.safe_write import write_text

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
    repack: bool = True  # False: tune measured no speed from llama.cpp's weight repacking here
    offload_device: str = "none"  # the -dev tune chose: none (the CPU) or the GPU answering a turn soonest
    n_gpu_layers: int = 0
    version: int = PROFILE_VERSION
    notes: list[str] = field(default_factory=list)
    chosen_by: str = "burst"  # "sustained": tune --sustained kept generation's settings for the speed held
    sustained_tps: float | None = None  # that steady speed
    # tune --speculation: per kind of text (chat, rewrite, code), the speculation that measured faster than
    # plain here: {"kind": "lookup", "speedup": 1.32} or {"kind": "draft", "speedup": 1.2, "draft": PATH};
    # a kind left out keeps plain generation
    speculation: dict[str, dict[str, Any]] = field(default_factory=dict)

    def usable_cpus(self, allowed: list[int]) -> list[int]:
        """The profile's CPUs this process may use (taskset or a cgroup may have narrowed them since)."""
        return [c for c in self.cpus if c in allowed]


def profiles_dir() -> Path:
    return data_dir() / "profiles"


def profile_path(model_key: str, device_fp: str, sustained: bool = False) -> Path:
    return profiles_dir() / f"{model_key}@{device_fp}{'.sustained' if sustained else ''}.json"


def writable_profiles_dir(also: str = "") -> Path:
    """The profiles folder, ready for a profile (checked before tune measures for minutes)."""
    return writable_data_folder(profiles_dir(), "the tuned profiles", also)


def save_profile(profile: Profile) -> Path:
    path = profile_path(profile.model_key, profile.device_fingerprint, profile.chosen_by == "sustained")
    writable_profiles_dir()
    text = json.dumps(asdict(profile), indent=2) + "\n"
    while len(text.encode()) > PROFILE_FILE and profile.notes:  # within what read_profile accepts
        profile.notes = profile.notes[: len(profile.notes) // 2]
        text = json.dumps(asdict(profile), indent=2) + "\n"
    try:
        write_text(path, text, what="profile")
    except UserError as exc:
        raise UserError(f"cannot save the profile: {exc}; set EDGEPILOT_DATA_DIR") from None
    return path


def _refused(path: Path, exc: OSError, strict: bool) -> None:
    """A profile or the profiles folder that may not be read: an error for `tune --show`, a note for a run
    (which plans without it)."""
    if strict:
        what = "the tuned profiles" if os.path.isdir(path) else "the tuned profile"
        raise cannot_read(path, exc, DATA_FIX, what=what)
    note_once(
        f"cannot read the tuned profiles in {escaped(path)} ({refused_where(path, exc)}): planning without "
        f"them; {DATA_FIX}"
    )


def read_profile(path: Path, strict: bool = False) -> Profile | None:
    """A profile file, or None if it is unreadable, from another version or damaged (an error only when
    strict and permissions refuse it; a note otherwise). Read as input (kept.py): a regular file within
    PROFILE_FILE, every field of its type and in range; a profile with one that is not is left out, said once
    naming the file."""
    try:
        data = read_json(path, PROFILE_FILE, "the tuned profile", "planned without it")
    except OSError as exc:
        _refused(path, exc, strict)
        return None
    if not isinstance(data, dict) or data.get("version") != PROFILE_VERSION:
        return None
    known = {f.name for f in fields(Profile)}
    try:
        profile = Profile(**{k: v for k, v in data.items() if k in known})
    except TypeError:
        return None
    bad = _out_of_range(profile)
    if bad is not None:
        dropped = Dropped(path, "the tuned profile", "planned without it")
        dropped.drop(*bad)
        dropped.note()
        return None
    return profile


MAX_CPUS = 1 << 16
PROFILE_FILE = 256 << 10  # a profile is a few hundred bytes; save_profile keeps it within this
_COUNTS = {"n_threads": 1, "n_threads_batch": 1, "n_ubatch": 1, "n_prompt": 0, "n_gen": 0, "n_gpu_layers": 0}
_TEXTS = ("device_fingerprint", "device", "model_key", "model_name", "created", "offload_device")


SPEC_TEXT_KINDS = ("chat", "rewrite", "code")


def _kept_ok(kept: object) -> bool:
    """{"kind": "lookup", "speedup": x} or {"kind": "draft", "speedup": x, "draft": its path} (and the
    draft length measured, "draft_max", where it is not llama-server's default)."""
    if not isinstance(kept, dict) or not is_number(kept.get("speedup"), 1.0, 1e3):
        return False
    if kept.get("kind") == "lookup":
        return set(kept) == {"kind", "speedup"}
    draft, length = kept.get("draft"), kept.get("draft_max", 1)
    return (
        kept.get("kind") == "draft"
        and set(kept) - {"draft_max"} == {"kind", "speedup", "draft"}
        and type(length) is int
        and 1 <= length <= 64
        and isinstance(draft, str)
        and 0 < len(draft) <= 4096
        and "\0" not in draft
    )


def _speculation_ok(value: object) -> bool:
    if not isinstance(value, dict) or len(value) > len(SPEC_TEXT_KINDS):
        return False
    return all(kind in SPEC_TEXT_KINDS and _kept_ok(kept) for kind, kept in value.items())


def _out_of_range(p: Profile) -> tuple[str, object] | None:
    """The first field of the profile out of its type or range (name, value), or None."""
    for name, low in _COUNTS.items():
        if not is_int(getattr(p, name), low, MAX_COUNT):
            return name, getattr(p, name)
    checks: list[tuple[str, bool]] = [
        ("model_size", is_int(p.model_size, 0, MAX_BYTES)),
        ("gen_tps", is_number(p.gen_tps, 0, 1e9)),
        ("prompt_tps", is_number(p.prompt_tps, 0, 1e9)),
        ("sustained_tps", p.sustained_tps is None or is_number(p.sustained_tps, 0, 1e9)),
        ("flash_attn", isinstance(p.flash_attn, bool)),
        ("repack", isinstance(p.repack, bool)),
        ("chosen_by", p.chosen_by in ("burst", "sustained")),
        ("notes", isinstance(p.notes, list) and all(isinstance(n, str) for n in p.notes)),
        ("speculation", _speculation_ok(p.speculation)),
    ]
    for name in ("cpus", "prompt_cpus"):
        value = getattr(p, name)
        ok = isinstance(value, list) and all(is_int(c, 0, MAX_CPUS) for c in value)
        checks.append((name, ok))
    checks += [(name, isinstance(getattr(p, name), str)) for name in _TEXTS]
    for name, ok in checks:
        if not ok:
            return name, getattr(p, name)
    return None


@dataclass
class ProfileView:
    """`tune --show` / `tune --forget`: the profile of a model on this device, where it is, what happened."""

    model: str
    path: str  # where this device's profile for the model is (or would be)
    profile: Profile | None  # the one run uses
    forgotten: bool = False
    sustained_path: str | None = None  # a profile tuned with --sustained (serve prefers it), if there is one


def _identity(model: Path, root: Path) -> tuple[str, str]:
    """The profile's name parts: the model's key and the device's fingerprint."""
    from edgepilot.tuned.identity import device_id, model_id

    return model_id(model).key, device_id(root).fingerprint


def show_profile(model_path: Path | str, root: Path = Path("/")) -> ProfileView:
    path = Path(model_path)
    key, fp = _identity(path, root)
    profile = load_profile(path, root, strict=True)
    sustained = profile_path(key, fp, sustained=True)
    where = sustained if profile is not None and profile.chosen_by == "sustained" else profile_path(key, fp)
    also = str(sustained) if sustained.exists() and sustained != where else None
    return ProfileView(model=str(path), path=str(where), profile=profile, sustained_path=also)


def forget_profile(model_path: Path | str, root: Path = Path("/")) -> ProfileView:
    """Remove this device's profiles for the model, the one tuned with --sustained too (a damaged or
    unreadable one as well: its name comes from the model and the device, so it is not read to be found):
    later runs plan without them."""
    path = Path(model_path)
    key, fp = _identity(path, root)
    view = ProfileView(model=str(path), path=str(profile_path(key, fp)), profile=None)
    burst, burst_profile = _remove(profile_path(key, fp))
    sustained, sustained_profile = _remove(profile_path(key, fp, sustained=True))
    view.forgotten = burst or sustained
    view.profile = burst_profile or sustained_profile
    if sustained:
        view.sustained_path = str(profile_path(key, fp, sustained=True))
        if not burst:
            view.path, view.sustained_path = view.sustained_path, None
    return view


def _remove(where: Path) -> tuple[bool, Profile | None]:
    """Remove one profile file: (whether there was one, what it held if it could be read)."""
    readable = os.access(where, os.R_OK)  # read only to say which profile went; never a note or an error
    profile = read_profile(where) if readable else None
    try:
        os.unlink(where)
    except FileNotFoundError:
        return False, None
    except OSError as exc:
        if is_denied(exc):
            raise UserError(
                f"cannot remove the profile {escaped(where)}: {reason(exc)} in {escaped(where.parent)}; "
                f"{DATA_FIX}"
            ) from None
        raise UserError(f"cannot remove the profile {escaped(where)}: {exc.strerror or exc}") from None
    return True, profile


def load_profile(
    model_path: Path | str, root: Path = Path("/"), strict: bool = False, sustained: bool = False
) -> Profile | None:
    """The tuned profile for this model on this device, or None (no tune yet, other device, damaged file).
    A profile the permissions keep from us: an error when strict (`tune --show`), else a note.
    sustained: prefer the one `tune --sustained` saved (serve); else the burst one first."""
    path = Path(model_path)
    folder = profiles_dir()
    try:
        names = set(os.listdir(folder))
    except OSError as exc:
        if is_denied(exc):
            _refused(folder, exc, strict)
        return None
    from edgepilot.tuned.identity import device_id, model_id  # imported once there is a profile folder

    try:
        key = model_id(path).key
    except UserError:
        return None
    if not any(n.startswith(f"{key}@") and n.endswith(".json") for n in names):
        return None
    fp = device_id(root).fingerprint
    for kind in (True, False) if sustained else (False, True):
        match = profile_path(key, fp, sustained=kind)
        profile = read_profile(match, strict) if match.name in names else None
        if profile is not None:
            return profile
    return None
