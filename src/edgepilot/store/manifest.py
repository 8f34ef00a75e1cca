"""The model store: `<store>/<owner>__<repo>/<file>` plus `manifest.json` (repo, file, revision, sha256, size,
time of each pulled file).

The store is `--store`, else $EDGEPILOT_MODELS_DIR, else `models/` under edgepilot's data dir. A store on
FUSE (Android's /sdcard) or another slow filesystem gets a warning naming a better place (Termux's home).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot import safe_write, untrusted
from edgepilot.datadir import DATA_ELSEWHERE, data_dir
from edgepilot.device import fs
from edgepilot.device.storage import classify, read_mounts
from edgepilot.errors import UserError
from edgepilot.file_errors import (
    cannot_read,
    cannot_write_in,
    file_in_the_way,
    is_denied,
    not_a_directory,
    reason,
    writable_folder,
)
from edgepilot.gguf.stored import find_in_store, store_path  # noqa: F401  (store_path: re-exported)
from edgepilot.sizes import read_count
from edgepilot.store.hub import MAX_FILE, join_inside, safe_repo_path, store_dir_name
from edgepilot.store.locks import STORE_FIX, remove_unclaimed, store_lock

MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 8 << 20
PART_SUFFIX = ".part"
GLOB_CHARS = "*?[]"
SHA256_RE = re.compile(r"[0-9a-f]{64}")
READ_FIX = "make it readable to you (chmod), or choose another store with --store (or EDGEPILOT_MODELS_DIR)"
RM_FIX = "make it writable to you and try again (nothing was removed)"
ANOTHER_STORE = "choose a folder with --store (or EDGEPILOT_MODELS_DIR)"


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
    # what this user cannot read (left out of the listing), each "NAME: why": a folder or file of another user
    unreadable: list[str] = field(default_factory=list)
    # the model run, chat and serve use without MODEL (shipped as a package, not in the store), if installed
    bundled: StoredModel | None = None


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
def read_manifest(store: Path, unreadable: list[str] | None = None) -> list[ManifestEntry]:
    """The manifest's entries; an absent manifest is empty, an unreadable one a UserError (or, given
    `unreadable`, noted there and empty: a listing shows the files without it). An entry of the wrong
    shape or with a value out of range is left out, not trusted."""
    entries = (_entry(item) for item in _read_items(store, unreadable))
    return [e for e in entries if e is not None]


def _read_items(store: Path, unreadable: list[str] | None = None) -> list[object]:
    """The manifest's list of models as stored: rewrites keep the items they do not understand."""
    path = store / MANIFEST
    try:
        data = untrusted.loads_json(untrusted.read_capped(path, MAX_MANIFEST_BYTES))
        if not isinstance(data, dict) or not isinstance(data.get("models", []), list):
            raise ValueError("not a manifest: no list of models")
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        raise UserError(
            f"the model store {store} is not a directory (or a part of its path is not)"
        ) from None
    except PermissionError as exc:
        if unreadable is None:
            raise cannot_read(path, exc, READ_FIX, what="the store's manifest") from None
        unreadable.append(f"{MANIFEST}: {reason(exc)}")
        return []
    except (OSError, ValueError) as exc:
        raise UserError(
            f"the store's manifest {path} is unreadable ({exc}); move it away to start afresh"
        ) from None
    return list(data.get("models", []))


def _without(items: list[object], name: str) -> list[object]:
    return [item for item in items if (e := _entry(item)) is None or e.name != name]


def _entry(item: object) -> ManifestEntry | None:
    if not isinstance(item, dict):
        return None
    texts = {k: item.get(k) for k in ("name", "repo", "file", "revision", "sha256", "time")}
    commit = item.get("commit")
    if not all(isinstance(v, str) and 0 < len(v) <= 1024 for v in texts.values()):
        return None
    if commit is not None and not (isinstance(commit, str) and len(commit) <= 1024):
        return None
    try:
        size = read_count(item.get("size"), what="size", maximum=MAX_FILE)
        safe_repo_path(texts["name"])
    except (ValueError, UserError):
        return None
    if "/" not in texts["name"] or not SHA256_RE.fullmatch(texts["sha256"]):
        return None
    clean = {k: untrusted.valid_text(v) for k, v in texts.items()}
    return ManifestEntry(commit=commit and untrusted.valid_text(commit), size=size, **clean)


def write_manifest(store: Path, items: list[ManifestEntry] | list[object]) -> None:
    """Atomically (a fresh temporary file in the store, then os.replace); call with the store lock held."""
    from edgepilot.jsonable import to_jsonable

    body = json.dumps({"version": 1, "models": to_jsonable(items)}, indent=2) + "\n"
    safe_write.write_text(store / MANIFEST, body, what="the store's manifest", fix=STORE_FIX)


def record(
    store: Path, repo: str, file: str, revision: str, commit: str | None, sha256: str, size: int
) -> None:
    name = entry_name(repo, file)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    with store_lock(store):  # read, change and write back as one step: concurrent pulls lose no entry
        items = _without(_read_items(store), name)
        items.append(ManifestEntry(name, repo, file, revision, commit, sha256, size, now))
        write_manifest(store, items)


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
def _not_a_store(store: Path) -> UserError:
    """A file where the store (or a folder above it) should be: not an empty store."""
    fix = ANOTHER_STORE
    if store.absolute().is_relative_to(data_dir().absolute()):  # the default store, in the data folder
        fix += f", or {DATA_ELSEWHERE}"
    return not_a_directory(store, fix, what="the model store")


def _describe(path: Path) -> tuple[str | None, str]:
    """(quantization, verdict) of a stored file, from its header and tail (never the whole file)."""
    from edgepilot.gguf.gguf_info import file_type_name
    from edgepilot.gguf.verdict import model_verdict, one_line

    try:
        verdict = model_verdict(path, "load")
    except UserError as exc:
        return None, one_line(str(exc), 160)
    quant = file_type_name(verdict.header.metadata.get("general.file_type"))
    return quant, "ok" if verdict.refusal is None else one_line(verdict.refusal.message, 160)


def _store_files(store: Path, listing: StoreListing) -> Iterator[tuple[str, os.stat_result]]:
    """(name inside the store, lstat) of each regular file below the store's top level, in name order; no
    link is followed. What this user cannot read is noted in listing.unreadable and left out (a folder or
    file of another user); a store it cannot list at all is refused."""

    def walk(folder: Path, prefix: str) -> Iterator[tuple[str, os.stat_result]]:
        try:
            with os.scandir(folder) as found:
                entries = sorted(found, key=lambda e: e.name)
        except OSError as exc:
            if not prefix:
                raise cannot_read(store, exc, READ_FIX, what="the model store") from None
            listing.unreadable.append(f"{prefix}/: {reason(exc)}")
            return
        for entry in entries:
            name = f"{prefix}/{entry.name}" if prefix else entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed while we listed
            except OSError as exc:
                listing.unreadable.append(f"{name}: {reason(exc)}")
                continue
            if stat.S_ISDIR(st.st_mode):
                yield from walk(folder / entry.name, name)
            elif stat.S_ISREG(st.st_mode) and prefix:
                yield name, st

    yield from walk(store, "")


def list_store(store: Path, root: Path | str = "/") -> StoreListing:
    listing = StoreListing(store=store)
    _list_files(store, root, listing)
    listing.bundled = _bundled()
    return listing


def _list_files(store: Path, root: Path | str, listing: StoreListing) -> None:
    try:
        mode = os.stat(store).st_mode
    except PermissionError as exc:  # a folder above it that this user may not enter
        raise cannot_read(store, exc, READ_FIX, what="the model store") from None
    except NotADirectoryError:
        raise _not_a_store(store) from None
    except OSError:
        return  # no store yet: nothing pulled
    if not stat.S_ISDIR(mode):
        raise _not_a_store(store)
    listing.warning = storage_warning(store, root)
    files = list(_store_files(store, listing))
    manifest = {e.name: e for e in read_manifest(store, listing.unreadable)}
    for name, st in files:
        if name.endswith(PART_SUFFIX):
            listing.partial.append(name)
            continue
        if not name.endswith(".gguf"):
            continue
        path, size = store / name, st.st_size
        quant, verdict = _describe(path)
        entry = manifest.get(name)
        listing.models.append(
            StoredModel(
                name=name,
                path=path,
                size=size,
                repo=entry.repo if entry else None,
                quant=quant,
                verdict=verdict,
                sha256=entry.sha256 if entry else None,
                pulled=entry.time if entry else None,
            )
        )


def _bundled() -> StoredModel | None:
    """The bundled model, as `run` without MODEL finds it; never made here (None without its package)."""
    from edgepilot.gguf.gguf_header import read_header
    from edgepilot.gguf.gguf_info import file_type_name
    from edgepilot.gguf.resolve import bundled_model_made

    found = bundled_model_made()
    if found is None:
        return None
    path, size, head = found
    if head == path:
        quant, verdict = _describe(path)
    else:  # its header is at the start of its package's first part
        try:
            quant = file_type_name(read_header(head).metadata.get("general.file_type"))
        except UserError:
            quant = None
        verdict = "ok (made from its package when first run)"
    return StoredModel(name=path.name, path=path, size=size, repo=None, quant=quant, verdict=verdict)


def find_stored(store: Path, name: str) -> Path | None:
    """A stored file by its store name (`owner__repo/file`), `owner/repo:file`, or a bare file name that is
    unique in the store; None when nothing matches."""
    return find_in_store(name, store)


def _match(entries: list[ManifestEntry], name: str) -> ManifestEntry | None:
    """The one entry `name` names exactly: its store name, OWNER/REPO:FILE, or a file name that only one
    entry has. Nothing is globbed or guessed."""
    exact = next((e for e in entries if e.name == name), None)
    head, sep, file = name.partition(":")
    if exact is not None or "/" in name and not sep:
        return exact
    if sep:
        try:
            wanted = entry_name(head, file)
        except UserError:
            return None
        return next((e for e in entries if e.name == wanted), None)
    by_file = [e for e in entries if e.name.rsplit("/", 1)[-1] == name]
    return by_file[0] if len(by_file) == 1 else None


def remove(store: Path, name: str) -> Removed:
    """Delete one pulled model and its manifest entry. The manifest is read (and must be readable) before
    anything is deleted, and is written back before the file goes: a failure leaves both as they were."""
    shown = untrusted.valid_text(name)[:200]
    missing = UserError(
        f"{shown!r} is not in the model store {store} (rm takes a pulled model's name exactly as "
        "`edgepilot models` lists it)"
    )
    if not store.is_dir():
        raise _not_a_store(store) if file_in_the_way(store) else missing
    with store_lock(store):
        items = _read_items(store)
        entry = _match([e for e in map(_entry, items) if e is not None], name)
        if entry is None:
            if any(ch in name for ch in GLOB_CHARS):
                raise UserError(
                    f"{shown!r} is a pattern: rm removes one model, named as `edgepilot models` lists it"
                )
            raise missing
        path = join_inside(store, entry.name)
        try:
            st = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            st = None  # deleted by hand: only the entry is left to remove
        except OSError as exc:
            raise UserError(f"cannot remove {entry.name}: {exc.strerror or exc}") from None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise UserError(f"{entry.name} in the model store is not a regular file: refused")
        if st is not None:
            writable_folder(path.parent, "the model store", RM_FIX, make=False)
        write_manifest(store, _without(items, entry.name))
        if st is not None:
            try:
                path.unlink()
            except OSError as exc:
                write_manifest(store, items)  # the file stays, so does its entry
                if is_denied(exc):
                    raise cannot_write_in("the model store", path.parent, reason(exc), RM_FIX) from None
                raise safe_write.write_failure(exc, "the model store", path) from None
        remove_unclaimed(Path(str(path) + PART_SUFFIX))
        with contextlib.suppress(OSError):  # the repo folder goes when it is empty
            path.parent.rmdir()
    return Removed(entry.name, path, st.st_size if st is not None else 0)
