"""The model store: `<store>/<owner>__<repo>/<file>` plus `manifest.json` (repo, file, revision, sha256, size,
time of each pulled file).

The store is `--store`, else $EDGEPILOT_MODELS_DIR, else `models/` under edgepilot's data dir. A store on
FUSE (Android's /sdcard) or another slow filesystem gets a warning naming a better place (Termux's home).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot import untrusted
from edgepilot.device import fs
from edgepilot.device.storage import classify, read_mounts
from edgepilot.errors import UserError
from edgepilot.model.stored import find_in_store, store_path  # noqa: F401  (store_path: re-exported)
from edgepilot.models.hub import join_inside, safe_repo_path, store_dir_name

MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 8 << 20
PART_SUFFIX = ".part"


@dataclass
class ManifestEntry:
    name: str  # `<owner>__<repo>/<file>`: the path inside the store, what `rm` and `run` accept
    repo: str
    file: str
    revision: str
    commit: str | None
    sha256: str
    size: int
    time: str  # UTC, ISO 8601


@dataclass
class StoredModel:
    name: str
    path: Path
    size: int
    repo: str | None  # None for a file put in the store by hand (not in the manifest)
    quant: str | None
    verdict: str  # "ok", or the problem that stops llama.cpp from loading it
    sha256: str | None = None
    pulled: str | None = None


@dataclass
class StoreListing:
    store: Path
    models: list[StoredModel] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)  # unfinished downloads (`.part`), resumed by `pull`
    warning: str | None = None


@dataclass
class Removed:
    name: str
    path: Path
    bytes_freed: int


def entry_name(repo: str, file: str) -> str:
    return f"{store_dir_name(repo)}/{safe_repo_path(file)}"


def target_path(store: Path, repo: str, file: str) -> Path:
    return join_inside(store, entry_name(repo, file))


# --- manifest -------------------------------------------------------------------------------------------
def read_manifest(store: Path) -> list[ManifestEntry]:
    path = store / MANIFEST
    try:
        data = untrusted.loads_json(untrusted.read_capped(path, MAX_MANIFEST_BYTES))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise UserError(
            f"the store's manifest {path} is unreadable ({exc}); move it away to start afresh"
        ) from None
    entries: list[ManifestEntry] = []
    for item in data.get("models", []) if isinstance(data, dict) else []:
        try:
            entry = ManifestEntry(**{k: item.get(k) for k in ManifestEntry.__dataclass_fields__})
            safe_repo_path(str(entry.name))
        except (TypeError, AttributeError, UserError):
            continue  # a damaged entry is dropped, not trusted
        entries.append(entry)
    return entries


def write_manifest(store: Path, entries: list[ManifestEntry]) -> None:
    """Atomically: a temporary file in the store, then os.replace."""
    from edgepilot.jsonable import to_jsonable

    store.mkdir(parents=True, exist_ok=True)
    body = json.dumps({"version": 1, "models": to_jsonable(entries)}, indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(dir=store, prefix=".manifest-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, store / MANIFEST)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def record(
    store: Path, repo: str, file: str, revision: str, commit: str | None, sha256: str, size: int
) -> None:
    name = entry_name(repo, file)
    entries = [e for e in read_manifest(store) if e.name != name]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    entries.append(ManifestEntry(name, repo, file, revision, commit, sha256, size, now))
    write_manifest(store, entries)


def find_entry(store: Path, repo: str, file: str) -> ManifestEntry | None:
    name = entry_name(repo, file)
    return next((e for e in read_manifest(store) if e.name == name), None)


# --- where the store lives --------------------------------------------------------------------------------
def storage_warning(store: Path, root: Path | str = "/") -> str | None:
    """A warning when the store is on FUSE or another slow filesystem, naming a better path."""
    root = Path(root)
    mounts, _ = read_mounts(root)
    if not mounts:
        return None
    env, _ = fs.read_env(root)
    home = env.get("HOME")
    place = classify(root, str(store.expanduser().absolute()), mounts, home)
    if not place.slow:
        return None
    better = f"{home.rstrip('/')}/models" if home else "~/models"
    return (
        f"the model store {store} is on {place.note}; models load and run faster from Termux's home "
        f"(internal storage): use --store {better} or EDGEPILOT_MODELS_DIR={better}"
    )


# --- list and remove ------------------------------------------------------------------------------------
def _describe(path: Path) -> tuple[str | None, str]:
    """(quantization, verdict) of a stored file, from its header and tail (never the whole file)."""
    from edgepilot.model.gguf_info import file_type_name
    from edgepilot.model.verdict import model_verdict, one_line

    try:
        verdict = model_verdict(path, "load")
    except UserError as exc:
        return None, one_line(str(exc), 160)
    quant = file_type_name(verdict.header.metadata.get("general.file_type"))
    return quant, "ok" if verdict.refusal is None else one_line(verdict.refusal.message, 160)


def list_store(store: Path, root: Path | str = "/") -> StoreListing:
    listing = StoreListing(store=store, warning=storage_warning(store, root) if store.exists() else None)
    if not store.is_dir():
        return listing
    manifest = {e.name: e for e in read_manifest(store)}
    for path in sorted(store.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.parent == store:
            continue
        name = path.relative_to(store).as_posix()
        if name.endswith(PART_SUFFIX):
            listing.partial.append(name)
            continue
        if not name.endswith(".gguf"):
            continue
        quant, verdict = _describe(path)
        entry = manifest.get(name)
        listing.models.append(
            StoredModel(
                name=name,
                path=path,
                size=path.stat().st_size,
                repo=entry.repo if entry else None,
                quant=quant,
                verdict=verdict,
                sha256=entry.sha256 if entry else None,
                pulled=entry.time if entry else None,
            )
        )
    return listing


def find_stored(store: Path, name: str) -> Path | None:
    """A stored file by its store name (`owner__repo/file`), `owner/repo:file`, or a bare file name that is
    unique in the store; None when nothing matches."""
    return find_in_store(name, store)


def remove(store: Path, name: str) -> Removed:
    path = find_stored(store, name)
    if path is None:
        raise UserError(f"{name!r} is not in the model store {store} (see `edgepilot models`)")
    resolved = path.resolve()
    if not resolved.is_relative_to(store.resolve()) or path.is_symlink():
        raise UserError(f"{name!r} is not a file inside the model store {store}: refused")
    size = path.stat().st_size
    rel = path.relative_to(store).as_posix()
    path.unlink()
    Path(str(path) + PART_SUFFIX).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # the repo folder goes when it is empty
        path.parent.rmdir()
    entries = read_manifest(store)
    if any(e.name == rel for e in entries):
        write_manifest(store, [e for e in entries if e.name != rel])
    return Removed(rel, path, size)
