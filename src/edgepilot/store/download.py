"""One file from the hub into the store: resumable (`.part` + Range), sha256-checked, renamed only when whole.

A transfer that stops half-way leaves `NAME.part`; the next pull asks for the rest with `Range: bytes=N-` and
hashes the part it already has first. A pull retries a broken transfer itself, a bounded number of times with
a doubling pause (Retry: EDGEPILOT_PULL_TRIES, EDGEPILOT_PULL_BACKOFF), each try resuming with Range.
The file appears under its own name (os.replace, atomic on one filesystem) only after its size and hash
match the hub's listing: the sha256 of an LFS file, the git blob id (the listing's `oid`) of a small file kept
in git; a mismatch deletes the part.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from edgepilot.errors import UserError
from edgepilot.safe_write import write_failure
from edgepilot.store.hub import HubClient, HubError, RepoFile
from edgepilot.store.hub_net import HubTimeout
from edgepilot.store.locks import STORE_FIX

CHUNK = 1 << 20
Progress = Callable[[int, int], None]  # (bytes done, bytes total)
TRIES_ENV = "EDGEPILOT_PULL_TRIES"
BACKOFF_ENV = "EDGEPILOT_PULL_BACKOFF"


@dataclass(frozen=True)
class Retry:
    """How often a broken transfer is tried again, and how long to wait before each new try."""

    tries: int = 3  # in all, the first one included
    backoff: float = 1.0  # seconds before the second try, doubled before each one after it

    @classmethod
    def from_env(cls) -> Retry:
        return cls(_env_number(TRIES_ENV, 3, 1, 20, int), _env_number(BACKOFF_ENV, 1.0, 0.0, 600.0, float))

    def delay(self, done: int) -> float:
        """The pause after `done` tries."""
        return self.backoff * 2 ** (done - 1)


def _env_number(name: str, default: float, low: float, high: float, kind: type) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise UserError(f"{name}={raw[:40]!r} is not a number between {low:g} and {high:g}")
    return value


RESUME = "run the same pull again to resume"


class TransferBroke(HubError):
    """The transfer broke (a reset, an early close, no connection, a server error): what arrived is in the
    part, and another try may get the rest. Not the hub's deadline passing (hub_net's contract: one line
    within it), nor a refusal (4xx) or a wrong answer (a range or size other than asked, a bad hash)."""

    def __init__(self, reason: str, have: int, hasher: hashlib._Hash, advice: str = RESUME) -> None:
        super().__init__(f"{reason}; {advice}" if advice else reason)
        self.reason, self.advice, self.have, self.hasher = reason, advice, have, hasher

    def after(self, tries: int) -> HubError:
        """The one line for the user once every try broke."""
        reason = f"{self.reason} (tried {tries} times)" if tries > 1 else self.reason
        return HubError(f"{reason}; {self.advice}" if self.advice else reason, self.status, self.code)


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f}"


@dataclass
class Downloaded:
    path: Path
    sha256: str
    size: int
    resumed_from: int  # bytes already in the .part when this pull started (0: a fresh download)
    commit: str | None  # the revision's commit id (X-Repo-Commit), when the hub said it


def part_path(target: Path) -> Path:
    return target.with_name(target.name + ".part")


def _hash_existing(part: BinaryIO, n: int, hasher: hashlib._Hash, progress: Progress, total: int) -> None:
    done = 0
    part.seek(0)
    while done < n:
        chunk = part.read(min(CHUNK, n - done))
        if not chunk:
            raise HubError(f"{part.name} became shorter while being read")
        hasher.update(chunk)
        done += len(chunk)
        progress(done, total)


def content_range(value: str | None) -> tuple[int, int] | None:
    """(first byte, total size) of a `Content-Range: bytes A-B/TOTAL` header."""
    match = re.fullmatch(r"\s*bytes\s+([0-9]{1,19})-([0-9]{1,19})/([0-9]{1,19})\s*", value or "")
    return (int(match.group(1)), int(match.group(3))) if match else None


def _count(header: str) -> int | None:
    """A byte count from a header: ASCII digits only (str.isdigit takes '²', int() chokes on 5000 digits)."""
    return int(header) if re.fullmatch(r"\s*[0-9]{1,19}\s*", header) else None


def check_space(folder: Path, needed: int) -> None:
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return
    if needed > free:
        raise HubError(
            f"{folder} has {free / 2**30:.2f} GiB free but the download needs {needed / 2**30:.2f} GiB more"
        )


def download(
    client: HubClient,
    repo: str,
    file: RepoFile,
    target: Path,
    part: BinaryIO,
    revision: str = "main",
    progress: Progress | None = None,
    retry: Retry | None = None,
    on_retry: Callable[[str], None] | None = None,
) -> Downloaded:
    """Fill `part` (the target's `.part`, opened and locked by locks.claim_part) and rename it to `target`;
    a broken transfer is tried again as `retry` says, each new try announced through on_retry."""
    tick = progress or (lambda _done, _total: None)
    part_name = part_path(target)
    try:
        have = os.fstat(part.fileno()).st_size
        if have > file.size:  # not a prefix of this file: start again
            part.truncate(0)
            have = 0
    except OSError as exc:
        raise write_failure(exc, "the download", part_name, STORE_FIX) from None
    check_space(target.parent, file.size - have)
    hasher = hashlib.sha256()
    if have:
        _hash_existing(part, have, hasher, tick, file.size)
    resumed_from, commit = have, None
    policy = retry or Retry()
    done = 0
    while have < file.size:
        done += 1
        try:
            have, hasher, commit = _transfer(
                client, repo, file, part, part_name, have, hasher, revision, tick
            )
        except TransferBroke as exc:
            have, hasher = exc.have, exc.hasher
            if done >= policy.tries:
                raise exc.after(done) from None
            pause = policy.delay(done)
            say = on_retry or (lambda _msg: None)
            say(
                f"transfer broke at {_mib(have)} of {_mib(file.size)} MiB: retrying ({done + 1} of "
                f"{policy.tries}) in {pause:g} s"
            )
            time.sleep(pause)
    if have != file.size:
        raise HubError(
            f"{file.path}: the transfer stopped at {have} of {file.size} bytes; "
            "run the same pull again to resume"
        )
    digest = hasher.hexdigest()
    try:
        problem = _mismatch(file, digest, part)
        if problem:
            part_name.unlink(missing_ok=True)  # ours to delete: we hold its lock
            raise HubError(f"{file.path}: {problem}: the download is corrupt and was deleted; pull again")
        os.replace(part_name, target)
    except OSError as exc:
        raise write_failure(exc, "the model", target, STORE_FIX) from None
    return Downloaded(target, digest, file.size, resumed_from, commit)


def _mismatch(file: RepoFile, digest: str, part: BinaryIO) -> str | None:
    """How the downloaded bytes differ from what the hub lists (its sha256 is `digest`), or None."""
    if file.sha256 is not None:
        return None if digest == file.sha256 else f"sha256 {digest} does not match the hub's {file.sha256}"
    if file.git_oid is not None:
        part.seek(0)
        blob = git_blob_id(part, file.size, file.git_oid)
        return None if blob == file.git_oid else f"git blob id {blob} does not match the hub's {file.git_oid}"
    return None


def git_blob_id(f: BinaryIO, size: int, like: str) -> str:
    """The git object id of a blob holding the `size` bytes read from f: the sha1 of b"blob SIZE\\0" and the
    content, or its sha256 when `like` (the id to compare with) has 64 digits (git's sha256 format)."""
    hasher = hashlib.sha256() if len(like) == 64 else hashlib.sha1()
    hasher.update(b"blob %d\0" % size)
    done = 0
    while done < size:
        chunk = f.read(min(CHUNK, size - done))
        if not chunk:
            break
        hasher.update(chunk)
        done += len(chunk)
    return hasher.hexdigest()


def _transfer(  # type: ignore[no-untyped-def]
    client: HubClient,
    repo: str,
    file: RepoFile,
    part: BinaryIO,
    part_name: Path,
    have: int,
    hasher,
    revision: str,
    tick: Progress,
) -> tuple[int, hashlib._Hash, str | None]:
    """One request for the bytes after `have`: (bytes in the part, its hasher, the commit id)."""
    headers = {"Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    url = client.resolve_url(repo, file.path, revision)
    try:
        resp = client.open(url, headers, what=f"{repo}/{file.path}", stream=True)
    except HubError as exc:
        status = exc.status
        if (status is None and exc.code != "Timeout") or (
            status is not None and (status >= 500 or status == 429)
        ):
            raise TransferBroke(str(exc), have, hasher, advice="") from None
        raise
    with resp:
        commit = client.commit_of(resp)
        if have and resp.status == 206:
            span = content_range(resp.headers.get("Content-Range"))
            if span is None or span[0] != have or span[1] != file.size:
                raise HubError(
                    f"{file.path}: the server sent range {resp.headers.get('Content-Range')!r}, "
                    f"not bytes {have}-/{file.size}"
                )
        elif have:  # the server ignored the Range request: the whole file follows
            hasher, have = hashlib.sha256(), 0
        elif resp.status != 200:
            raise HubError(f"{file.path}: unexpected HTTP {resp.status}")
        announced = _count(resp.headers.get("Content-Length") or "")
        if announced is not None and announced != file.size - have:
            raise HubError(
                f"{file.path}: the server announces {announced} bytes but {file.size - have} are due"
            )
        have = _receive(resp, part, part_name, have, file, hasher, tick)
    if have < file.size:  # the body ended early without an error (no Content-Length to hold it to)
        raise TransferBroke(f"{file.path}: the transfer stopped at {have} of {file.size} bytes", have, hasher)
    return have, hasher, commit


def _receive(  # type: ignore[no-untyped-def]
    resp, part: BinaryIO, part_name: Path, have: int, file: RepoFile, hasher, tick: Progress
) -> int:
    """Append the body to the part (truncated to `have` first); returns the bytes the part now holds.

    A network failure keeps what arrived (the next pull resumes); a write failure (a full or read-only
    disk) is one line naming the part."""
    try:
        part.truncate(have)
        part.seek(have)
        while True:
            try:
                chunk = resp.read(CHUNK)
            except (http.client.HTTPException, OSError) as exc:
                _sync(part)
                broke = (
                    f"{file.path}: the transfer broke at {have} of {file.size} bytes ({type(exc).__name__})"
                )
                if isinstance(exc, HubTimeout):  # the deadline: hub_net's one line within it, no new try
                    raise HubError(f"{broke}; {RESUME}", code="Timeout") from None
                raise TransferBroke(broke, have, hasher) from None
            if not chunk:
                break
            if have + len(chunk) > file.size:
                raise HubError(f"{file.path}: the server sent more than the {file.size} bytes listed")
            part.write(chunk)
            hasher.update(chunk)
            have += len(chunk)
            tick(have, file.size)
        _sync(part)
    except OSError as exc:
        raise write_failure(exc, "the download", part_name, STORE_FIX) from None
    return have


def _sync(part: BinaryIO) -> None:
    part.flush()
    os.fsync(part.fileno())
