"""Whether a GGUF file on the hub fits this device, from its header alone (fetched with Range requests).

The header (metadata + tensor table) is at the start of the file; its length is not known in advance, so the
range grows (2 MiB, 4 MiB, ...) until the bounded parser reads it completely. The header is then written into
a sparse file of the listed size, the last MiB filled as a finished download's is, and planned by the same
settings decision `edgepilot fit` uses (tuned.decide): the plan depends on the header only.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.errors import UserError
from edgepilot.file_errors import no_temporary_folder
from edgepilot.gguf.gguf_header import read_header
from edgepilot.gguf.gguf_records import GGUFHeader
from edgepilot.plan.types import FitResult
from edgepilot.store.download import content_range
from edgepilot.store.hub import HubClient, HubError, RepoFile
from edgepilot.store.hub_net import read_bounded, read_some
from edgepilot.tuned.decide import decide

FIRST_RANGE = 2 << 20
MAX_HEADER_FETCH = 64 << 20  # real headers (262k-token vocabularies included) are a few tens of MiB
TAIL = 1 << 20


@dataclass
class RemoteFit:
    fits: bool | None  # None: could not be planned (reason says why)
    peak_rss_bytes: int | None = None
    max_ctx: int | None = None
    quant: str | None = None
    header_bytes: int = 0  # bytes fetched to read the header
    reason: str | None = None
    plan: FitResult | None = field(default=None, repr=False, metadata={"json": False})
    budget_bytes: int | None = None


@dataclass
class HeaderAllowance:
    """Bytes that header fetches may still read (one per listing): many files cost at most this much."""

    left: int


def fetch_header(
    client: HubClient,
    repo: str,
    file: RepoFile,
    revision: str,
    folder: Path,
    allowance: HeaderAllowance | None = None,
) -> tuple[Path, GGUFHeader, int]:
    """The file's first bytes in folder/head.gguf, enough for its whole header; (path, header, bytes).
    All rounds share one deadline and read at most MAX_HEADER_FETCH bytes (or what the allowance has left)."""
    url = client.resolve_url(repo, file.path, revision)
    allowance = allowance or HeaderAllowance(MAX_HEADER_FETCH)
    limit = min(file.size, MAX_HEADER_FETCH, allowance.left)
    want = min(FIRST_RANGE, limit)
    head = folder / "head.gguf"
    data = b""
    deadline = client.deadline()
    while True:  # each round asks only for the bytes it does not have yet
        if want <= len(data):
            raise HubError(f"{file.path}: this listing's header reads are used up")
        headers = {"Range": f"bytes={len(data)}-{want - 1}", "Accept-Encoding": "identity"}
        with client.open(url, headers, what=f"{repo}/{file.path}", deadline=deadline) as resp:
            if resp.status == 200:  # a server that ignores Range sends the whole file: take what was asked
                data = read_some(resp, want, f"{file.path} header")
                allowance.left -= len(data)
            else:
                span = content_range(resp.headers.get("Content-Range"))
                if span is None or span[0] != len(data):
                    raise HubError(f"{file.path}: the server answered a range request with the wrong bytes")
                more = read_bounded(resp, want - len(data), f"{file.path} range")
                allowance.left -= len(more)
                data += more
        head.write_bytes(data)
        header = read_header(head)
        if header.complete:
            return head, header, len(data)
        # A header cut by the range end shows up as whatever was being read there; only a bad start is final.
        hopeless = any(p.code in ("bad-magic", "bad-version") for p in header.problems)
        limit = min(limit, len(data) + allowance.left)
        if hopeless or len(data) < want or want >= limit:
            problem = header.problems[0].message if header.problems else "unreadable header"
            raise HubError(f"{file.path}: {problem}")
        want = min(want * 2, limit)


def plan_remote(
    client: HubClient,
    repo: str,
    file: RepoFile,
    revision: str = "main",
    budget_bytes: int | None = None,
    root: Path | str = "/",
    allowance: HeaderAllowance | None = None,
) -> RemoteFit:
    from edgepilot.gguf.gguf_info import file_type_name

    try:
        scratch = tempfile.TemporaryDirectory(prefix="edgepilot-head-")
    except OSError:  # no temporary folder this user can write (tempfile tried $TMPDIR, /tmp, ...)
        raise no_temporary_folder() from None
    with scratch as tmp:
        folder = Path(tmp)
        try:
            head, header, fetched = fetch_header(client, repo, file, revision, folder, allowance)
        except HubError as exc:
            if exc.code == "Timeout":  # a hub this slow would hold every other header as long: stop here
                raise
            return RemoteFit(fits=None, reason=str(exc))
        quant = file_type_name(header.metadata.get("general.file_type"))
        padded = folder / Path(file.path).name
        head.rename(padded)
        with padded.open("r+b") as f:  # sparse: costs the header and the tail only
            f.truncate(file.size)
            if file.size - TAIL > fetched:
                f.seek(file.size - TAIL)
                f.write(b"\x5a" * TAIL)
        try:
            plan = decide(padded, budget_bytes=budget_bytes, root=root, use_profile=False).plan
        except UserError as exc:  # e.g. a projector (mmproj) or an architecture the planner does not know
            return RemoteFit(fits=None, quant=quant, header_bytes=fetched, reason=str(exc))
        plan.model = f"{repo}/{file.path}"
        return RemoteFit(
            fits=plan.fits,
            peak_rss_bytes=plan.memory.peak_rss_bytes,
            max_ctx=plan.max_ctx,
            quant=quant,
            header_bytes=fetched,
            plan=plan,
            budget_bytes=plan.budget_bytes,
        )
