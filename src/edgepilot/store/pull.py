"""`edgepilot pull REPO [FILE] [--best]`: list a hub repository's GGUF files with whether each fits this
device, or download one (the given FILE, or with --best the largest that fits) into the model store."""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from edgepilot.errors import UserError
from edgepilot.safe_write import check_target
from edgepilot.store import manifest as model_store
from edgepilot.store.download import Progress, Retry, download, git_blob_id, part_path
from edgepilot.store.hub import HubClient, RepoFile, check_repo_id, check_revision
from edgepilot.store.locks import claim_part, make_folder
from edgepilot.store.remote_fit import HeaderAllowance, RemoteFit, plan_remote
from edgepilot.untrusted import open_regular

SPLIT_RE = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
# A listing reads headers (a few MiB each, up to remote_fit.MAX_HEADER_FETCH) of the smallest files first, and
# stops at either cap: a repository of 400 GGUF files must not cost ~800 MiB of headers.
MAX_PLANNED = 32
MAX_LISTING_HEADER_BYTES = 256 << 20


@dataclass
class Candidate:
    file: str
    size: int
    sha256: str | None
    fits: bool | None  # None: not planned (reason says why)
    quant: str | None = None
    peak_rss_bytes: int | None = None
    max_ctx: int | None = None
    reason: str | None = None


@dataclass
class PullResult:
    repo: str
    revision: str
    endpoint: str
    store: Path
    candidates: list[Candidate] = field(default_factory=list)  # listed and planned (no FILE given)
    budget_bytes: int | None = None
    file: str | None = None  # the file pulled; None when only listing
    path: Path | None = None
    size: int | None = None
    sha256: str | None = None
    git_blob_id: str | None = None  # a small file kept in git: the listing's blob id it was checked against
    resumed_from: int = 0
    already_present: bool = False
    warning: str | None = None


def _candidate(f: RepoFile, fit: RemoteFit | None, reason: str | None = None) -> Candidate:
    if fit is None:
        return Candidate(f.path, f.size, f.sha256, None, reason=reason)
    return Candidate(
        f.path, f.size, f.sha256, fit.fits, fit.quant, fit.peak_rss_bytes, fit.max_ctx, fit.reason or reason
    )


def _pick_file(files: list[RepoFile], wanted: str, repo: str) -> RepoFile:
    exact = [f for f in files if f.path == wanted]
    by_name = [f for f in files if f.path.rsplit("/", 1)[-1] == wanted]
    found = exact or (by_name if len(by_name) == 1 else [])
    if found:
        return found[0]
    ggufs = [f.path for f in files if f.path.lower().endswith(".gguf")]
    shown = ", ".join(ggufs[:8]) + (", ..." if len(ggufs) > 8 else "")
    return_hint = f"; its GGUF files: {shown}" if ggufs else "; it has no GGUF files"
    raise UserError(f"{wanted!r} is not a file of {repo}{return_hint}")


def list_candidates(
    client: HubClient,
    repo: str,
    files: list[RepoFile],
    revision: str,
    budget_bytes: int | None,
    root: Path | str,
    on_stage: Callable[[str], None],
) -> tuple[list[Candidate], int | None]:
    ggufs = sorted((f for f in files if f.path.lower().endswith(".gguf")), key=lambda f: f.size)
    if not ggufs:
        raise UserError(f"{repo} has no GGUF files (llama.cpp loads .gguf; look for a '-GGUF' repository)")
    out: list[Candidate] = []
    budget = None
    planned, allowance = 0, HeaderAllowance(MAX_LISTING_HEADER_BYTES)
    for f in ggufs:
        split = SPLIT_RE.search(f.path)
        if split:
            out.append(_candidate(f, None, f"part {int(split.group(1))} of a split model: not planned"))
            continue
        if planned >= MAX_PLANNED or allowance.left <= 0:
            out.append(_candidate(f, None, _NOT_PLANNED))
            continue
        on_stage(f"reading the header of {f.path}")
        fit = plan_remote(client, repo, f, revision, budget_bytes, root, allowance)
        planned += 1
        budget = budget or fit.budget_bytes
        out.append(_candidate(f, fit))
    return out, budget


_NOT_PLANNED = (
    f"not planned: a listing reads the headers of at most {MAX_PLANNED} files "
    f"({MAX_LISTING_HEADER_BYTES >> 20} MiB), smallest first; pull it by name to download it"
)


def pull(
    repo: str,
    file: str | None = None,
    *,
    best: bool = False,
    revision: str = "main",
    store: str | Path | None = None,
    budget_bytes: int | None = None,
    root: Path | str = "/",
    token: str | None = None,
    endpoint: str | None = None,
    progress: Progress | None = None,
    on_stage: Callable[[str], None] | None = None,
    retry: Retry | None = None,
    on_retry: Callable[[str], None] | None = None,
) -> PullResult:
    """retry: how a broken transfer is tried again (default: EDGEPILOT_PULL_TRIES / EDGEPILOT_PULL_BACKOFF,
    else 3 tries, 1 s then 2 s apart); on_retry hears one line per new try."""
    stage = on_stage or (lambda _msg: None)
    policy = retry or Retry.from_env()
    check_repo_id(repo)
    check_revision(revision)
    if file is not None and best:
        raise UserError("give either FILE or --best, not both")
    client = HubClient(endpoint, token)
    folder = model_store.store_path(store)
    result = PullResult(repo, revision, client.endpoint, folder)
    result.warning = model_store.storage_warning(folder, root)
    stage(f"listing {repo}")
    files = client.list_files(repo, revision)
    if file is None:
        result.candidates, result.budget_bytes = list_candidates(
            client, repo, files, revision, budget_bytes, root, stage
        )
        if not best:
            return result
        fitting = [c for c in result.candidates if c.fits]
        if not fitting:
            planned = [c for c in result.candidates if c.peak_rss_bytes]
            smallest = min(planned, key=lambda c: c.peak_rss_bytes or 0, default=None)
            need = f"; the smallest needs {smallest.peak_rss_bytes / 2**20:.0f} MiB" if smallest else ""
            budget = f" of {result.budget_bytes / 2**20:.0f} MiB" if result.budget_bytes else ""
            raise UserError(f"no GGUF file of {repo} fits the memory budget{budget}{need}")
        file = max(fitting, key=lambda c: c.size).file
    chosen = _pick_file(files, file, repo)
    target = model_store.target_path(folder, repo, chosen.path)
    result.file, result.path, result.size = chosen.path, target, chosen.size
    result.git_blob_id = chosen.git_oid
    if _present(result, folder, repo, chosen):
        return result
    check_target(target, what="the model")
    made = _missing_folders(target.parent, folder)
    with model_store.store_lock(folder):  # a store we cannot lock or write fails here, before the transfer
        make_folder(target.parent, "the model")
    waiting = f"another pull is downloading {chosen.path}; waiting for it to finish"
    try:
        with claim_part(part_path(target), lambda: stage(waiting)) as part:
            if _present(result, folder, repo, chosen):  # the pull we waited for finished it
                _discard_empty(part_path(target), part)
                return result
            stage(f"downloading {chosen.path}")
            got = download(client, repo, chosen, target, part, revision, progress, policy, on_retry)
            # recorded before the part's lock is released: a pull waiting for it then finds the entry
            model_store.record(folder, repo, chosen.path, revision, got.commit, got.sha256, got.size)
    except BaseException:
        _remove_if_empty(made)  # a refused download leaves no empty <owner>__<repo>/ behind
        raise
    result.sha256, result.resumed_from = got.sha256, got.resumed_from
    return result


def _missing_folders(folder: Path, store: Path) -> list[Path]:
    """The folders from `folder` up to (not including) `store` that do not exist yet, deepest first."""
    missing = []
    while folder != store and folder.parent != folder and not os.path.isdir(folder):
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_if_empty(folders: list[Path]) -> None:
    """The folders this pull made, deepest first, as long as they are empty (a part kept to resume is not)."""
    for made in folders:
        try:
            made.rmdir()
        except OSError:
            return


def _present(result: PullResult, folder: Path, repo: str, chosen: RepoFile) -> bool:
    """The file is in the store already, whole and as listed (its manifest entry says so)."""
    entry = model_store.find_entry(folder, repo, chosen.path)
    target = result.path
    try:
        st = os.stat(target, follow_symlinks=False) if target is not None else None
    except OSError:  # absent, or in a folder this user may not enter: the lock and the part say more
        st = None
    if (
        entry is None
        or st is None
        or not stat.S_ISREG(st.st_mode)
        or st.st_size != chosen.size
        or (chosen.sha256 is not None and entry.sha256 != chosen.sha256)
        or (chosen.git_oid is not None and _blob_id(target, chosen) != chosen.git_oid)
    ):
        return False
    result.sha256, result.already_present = entry.sha256, True
    return True


def _blob_id(path: Path, chosen: RepoFile) -> str | None:
    """The git blob id of a small file in the store (None when it cannot be read: then it is pulled again)."""
    try:
        with open_regular(path) as f:
            return git_blob_id(f, chosen.size, chosen.git_oid or "")
    except OSError:
        return None


def _discard_empty(part: Path, f: BinaryIO) -> None:
    """The empty part claim_part created, once the file turned out finished (we hold its lock)."""
    with contextlib.suppress(OSError):
        if os.fstat(f.fileno()).st_size == 0:
            part.unlink()
