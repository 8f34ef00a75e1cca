"""A small client for the Hugging Face hub's HTTP API, on the standard library.

It speaks the endpoints and headers of `huggingface_hub` (hf_api.list_repo_tree, file_download.hf_hub_url):
`GET {endpoint}/api/models/{repo}/tree/{revision}?recursive=true` lists files (size, and `lfs.oid`: the sha256
of an LFS file), paginated with a `Link: <...>; rel="next"` header; `GET {endpoint}/{repo}/resolve/{revision}/
{file}` serves a file, usually through a redirect to a CDN. Errors carry `X-Error-Code` (RepoNotFound,
RevisionNotFound, EntryNotFound, GatedRepo) and `X-Error-Message`.

huggingface_hub itself is not used: since 0.32 it requires hf-xet, a Rust extension with no wheel for Termux,
where pip cannot build Rust. Everything read from the network is bounded: listing bytes, entries and pages,
redirects, an overall deadline per request, and a body longer than announced is refused; the token goes only
to the endpoint's own origin (hub_net.py has these transport rules).
"""

from __future__ import annotations

import http.client
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from http.client import HTTPResponse
from pathlib import Path

from edgepilot import untrusted
from edgepilot.errors import UserError
from edgepilot.sizes import read_count
from edgepilot.store.hub_net import (
    MAX_TOKEN_BYTES,
    STREAM_PROGRESS,
    Deadline,
    DeadlineHTTPHandler,
    DeadlineHTTPSHandler,
    HubError,
    HubTimeout,
    check_endpoint,
    check_token,
    deadline_seconds,
    failed_url,
    read_bounded,
    token_allowed,
)

__all__ = ["HubClient", "HubError", "HubTimeout", "RepoFile", "read_bounded"]

DEFAULT_ENDPOINT = "https://huggingface.co"
# One page of a tree listing: the hub sends 1,000 entries of ~300 bytes; parsed, an entry costs ~1 KiB, and
# JSON nodes (counted before parsing: commas and brackets bound them) cap what a page of `{}` or `[]` costs.
MAX_LISTING_BYTES = 8 << 20
MAX_PAGE_ENTRIES = 5000
MAX_PAGE_NODES = 24 * MAX_PAGE_ENTRIES
MAX_PAGES = 20
MAX_FILES = 20000
MAX_REDIRECTS = 5
MAX_FILE = 1 << 40  # 1 TiB: the hub takes no file near this (its limit is 50 GB); a larger size is a lie
USER_AGENT = "edgepilot (hub client; huggingface_hub-compatible requests)"
# huggingface_hub's validate_repo_id, in ASCII and with the owner required: each part letters, digits, '.',
# '_', '-', at most 96 of them, neither starting nor ending with '-' or '.'; no '--' or '..' anywhere, no
# '.git' at the end. Matched whole (fullmatch): `$` would also match before a trailing newline.
REPO_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?"
REPO_RE = re.compile(rf"{REPO_PART}/{REPO_PART}")
GIT_OID_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a git object id: sha1, or sha256 (git's newer format)
MAX_REVISION = 255  # git allows longer ref names; no branch, tag or commit id of the hub's comes near this


@dataclass(slots=True)
class RepoFile:
    path: str  # inside the repository, '/'-separated
    size: int
    sha256: str | None  # the LFS object id (sha256 of the content); None for a small file kept in git
    git_oid: str | None = None  # a small file's git blob id (the listing's `oid`); None for an LFS file


def check_repo_id(repo: str) -> str:
    """`repo` when it is a repository id the hub can have; else UserError, before any request."""
    if not REPO_RE.fullmatch(repo) or "--" in repo or ".." in repo or repo.endswith(".git"):
        shown = untrusted.valid_text(repo)[:120]
        raise UserError(
            f"{shown!r} is not a repository id: give OWNER/NAME (letters, digits, '.', '_', '-'; no '--' or "
            "'..'; not starting or ending with '-' or '.'), e.g. bartowski/SmolLM2-135M-GGUF"
        )
    return repo


def check_revision(revision: str) -> str:
    """`revision` when it can be a branch, tag or commit (printable, no whitespace, at most MAX_REVISION
    characters); else UserError, before any request."""
    fits = 0 < len(revision) <= MAX_REVISION
    if not fits or not all(ch.isprintable() and not ch.isspace() for ch in revision):
        shown = untrusted.valid_text(revision)[:120]
        raise UserError(
            f"{shown!r} is not a revision: give a branch, tag or commit id (printable, no spaces, at most "
            f"{MAX_REVISION} characters), e.g. main or refs/pr/1"
        )
    return revision


def _quoted_path(path: str) -> str:
    """A repository id or a file path in a URL: each '/'-separated part quoted."""
    return urllib.parse.quote(path, safe="/")


def _quoted_revision(revision: str) -> str:
    """A revision is one segment of the URL, its '/' quoted too (refs/pr/1 -> refs%2Fpr%2F1), as
    huggingface_hub sends it: quoted once, here only."""
    return urllib.parse.quote(check_revision(revision), safe="")


def safe_repo_path(path: str) -> str:
    """A file name from the listing that stays inside the store when joined to a folder; else HubError."""
    parts = path.split("/")
    if (
        not path
        or len(path) > 1024
        or path.startswith("/")
        or "\\" in path
        or "\x00" in path
        or any(p in ("", ".", "..") for p in parts)
        or any(not ch.isprintable() for ch in path)
    ):
        raise HubError(f"the hub listed an unsafe file name {untrusted.valid_text(path)[:200]!r}: refused")
    return path


def read_token(token_file: str | None) -> str | None:
    """HF_TOKEN, or the first line of --token-file (read bounded, FIFO-safe); refused unless it can be sent
    as one header line."""
    if token_file is not None:
        data = untrusted.read_user_file(token_file, "token file", MAX_TOKEN_BYTES)
        token = data.decode("utf-8", "replace").strip().splitlines()
        if not token or not token[0].strip():
            raise UserError(f"token file {token_file} is empty")
        return check_token(token[0].strip(), f"the token in {token_file}")
    env = os.environ.get("HF_TOKEN")
    return check_token(env, "HF_TOKEN") if env else None


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follows at most MAX_REDIRECTS, without reading their bodies; keeps Range; the token goes only to the
    endpoint's own origin (hub_net.token_allowed)."""

    max_redirections = MAX_REDIRECTS

    def __init__(self, endpoint: str, token: str | None) -> None:
        self.endpoint, self.token = endpoint, token
        self.commit: str | None = None  # X-Repo-Commit of the hub's redirect (the CDN's answer lacks it)

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        self.commit = headers.get("X-Repo-Commit") or self.commit
        fp.close()  # urllib would read the redirect's body whole, without a bound
        if urllib.parse.urlsplit(newurl).scheme not in ("http", "https"):
            raise HubError(f"the hub redirected to {newurl[:200]!r}: only http(s) is followed")
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and self.token and token_allowed(new.full_url, self.endpoint):
            new.add_unredirected_header("Authorization", f"Bearer {self.token}")
        return new


class HubClient:
    def __init__(
        self, endpoint: str | None = None, token: str | None = None, deadline: float | None = None
    ) -> None:
        self.endpoint = check_endpoint(endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT)
        self.token = check_token(token, "the hub token") if token else None
        self.seconds = deadline if deadline is not None else deadline_seconds()
        self._deadline = Deadline(self.seconds)
        self._redirects = _Redirects(self.endpoint, self.token)
        current = lambda: self._deadline  # noqa: E731 - read by each new connection of a request
        self._opener = urllib.request.build_opener(
            DeadlineHTTPHandler(current), DeadlineHTTPSHandler(current), self._redirects
        )

    # --- requests ---------------------------------------------------------------------------------
    def deadline(self, stream: bool = False) -> Deadline:
        """A fresh deadline: for one request, several (a header fetch), or a streamed download (renewed as
        bytes arrive)."""
        return Deadline(self.seconds, STREAM_PROGRESS if stream else 0)

    def open(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        what: str = "",
        *,
        deadline: Deadline | None = None,
        stream: bool = False,
    ) -> HTTPResponse:
        """The answer to GET url, within the deadline (a fresh one unless given) and following redirects."""
        req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})
        if self.token and token_allowed(url, self.endpoint):
            req.add_unredirected_header("Authorization", f"Bearer {self.token}")
        self._redirects.commit = None
        self._deadline = deadline or self.deadline(stream)
        try:
            return self._opener.open(req, timeout=self._deadline.timeout())
        except urllib.error.HTTPError as exc:
            raise self._error(exc, what or url) from None
        except (OSError, ValueError, http.client.HTTPException) as exc:  # URLError is an OSError
            raise failed_url(what or url, self.endpoint, exc) from None

    def commit_of(self, resp: HTTPResponse) -> str | None:
        """The commit id the hub resolved the revision to, from the last request's answer or redirect."""
        return resp.headers.get("X-Repo-Commit") or self._redirects.commit

    def _error(self, exc: urllib.error.HTTPError, what: str) -> HubError:
        code = exc.headers.get("X-Error-Code") if exc.headers else None
        exc.close()
        if code == "RepoNotFound" or (exc.code == 401 and code is None):
            hint = "" if self.token else " (a private or gated one needs HF_TOKEN or --token-file)"
            return HubError(f"{what}: repository not found on {self.endpoint}{hint}", exc.code, code)
        if code == "RevisionNotFound":
            return HubError(f"{what}: revision not found on {self.endpoint}", exc.code, code)
        if code == "EntryNotFound" or exc.code == 404:
            return HubError(f"{what}: not found on {self.endpoint}", exc.code, code)
        if code == "GatedRepo" or exc.code == 403:
            return HubError(f"{what}: access refused (a gated repository: accept its terms, set HF_TOKEN)")
        return HubError(f"{what}: the hub answered HTTP {exc.code} {exc.reason}", exc.code, code)

    def url(self, *quoted: str, query: str = "") -> str:
        """The endpoint's URL of `quoted`: parts quoted already (_quoted_path, _quoted_revision), so none
        is quoted twice."""
        return f"{self.endpoint}/{'/'.join(quoted)}" + (f"?{query}" if query else "")

    def resolve_url(self, repo: str, path: str, revision: str) -> str:
        return self.url(_quoted_path(repo), "resolve", _quoted_revision(revision), _quoted_path(path))

    # --- API --------------------------------------------------------------------------------------
    def list_files(self, repo: str, revision: str = "main") -> list[RepoFile]:
        """Every file of the repository at `revision` (hf_api.list_repo_tree(recursive=True))."""
        check_repo_id(repo)
        url: str | None = self.url(
            "api/models", _quoted_path(repo), "tree", _quoted_revision(revision), query="recursive=true"
        )
        files: list[RepoFile] = []
        for _ in range(MAX_PAGES):
            if url is None:
                return files
            with self.open(url, {"Accept": "application/json"}, what=repo) as resp:
                body = read_bounded(resp, MAX_LISTING_BYTES, f"the file listing of {repo}")
                url = next_page(resp.headers.get("Link"), self.endpoint)
            files.extend(parse_page(body, repo))
            if len(files) > MAX_FILES:
                raise HubError(f"{repo} lists more than {MAX_FILES} files: refused")
        raise HubError(f"the file listing of {repo} has more than {MAX_PAGES} pages: refused")


def parse_page(body: bytes, repo: str) -> list[RepoFile]:
    """The files of one listing page; JSON nodes are counted before parsing (a node is preceded by a comma or
    opens a container), so a page of a million `{}` is refused at the cost of its bytes."""
    too_many = f"a page of the file listing of {repo} has more than {MAX_PAGE_ENTRIES} entries: refused"
    if body.count(b",") + body.count(b"{") + body.count(b"[") > MAX_PAGE_NODES:
        raise HubError(too_many)
    try:
        items = untrusted.loads_json(body)
    except ValueError as exc:
        raise HubError(f"the hub's file listing of {repo} is not valid JSON ({str(exc)[:100]})") from None
    if not isinstance(items, list):
        raise HubError(f"the hub's file listing of {repo} is not a list")
    if len(items) > MAX_PAGE_ENTRIES:
        raise HubError(too_many)
    return [entry for entry in map(parse_entry, items) if entry is not None]


def parse_entry(item: object) -> RepoFile | None:
    if not isinstance(item, dict) or item.get("type") != "file":
        return None
    path, size = item.get("path"), item.get("size")
    if not isinstance(path, str) or not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise HubError("the hub's file listing has an entry without a path or size")
    lfs = item.get("lfs")
    sha = lfs.get("oid") if isinstance(lfs, dict) else None
    if isinstance(lfs, dict) and isinstance(lfs.get("size"), int):
        size = lfs["size"]
    # an LFS file's `oid` names its pointer in git, not its content: only a small file's is checked
    oid = item.get("oid") if not isinstance(lfs, dict) else None
    try:
        size = read_count(
            size, what=f"the listed size of {untrusted.valid_text(path)[:200]!r}", maximum=MAX_FILE
        )
    except ValueError as exc:
        raise HubError(f"the hub's file listing is wrong: {exc}") from None
    if sha is not None and not (isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha)):
        raise HubError(f"the hub lists a malformed sha256 for {untrusted.valid_text(path)[:200]!r}")
    if oid is not None and not (isinstance(oid, str) and GIT_OID_RE.fullmatch(oid)):
        raise HubError(f"the hub lists a malformed git object id for {untrusted.valid_text(path)[:200]!r}")
    return RepoFile(safe_repo_path(path), size, sha, oid)


def next_page(link: str | None, endpoint: str) -> str | None:
    """The `rel="next"` URL of a Link header (huggingface_hub.utils._pagination), on the endpoint's host."""
    if not link:
        return None
    for part in link.split(","):
        match = re.match(r'\s*<([^>]*)>\s*;\s*rel="?next"?', part)
        if match:
            try:
                url = urllib.parse.urljoin(endpoint + "/", match.group(1))
            except ValueError:
                url = ""
            if not token_allowed(url, endpoint):  # the token goes with every page
                raise HubError(
                    f"the hub's listing points its next page at {untrusted.valid_text(url)[:200]!r}, "
                    "not at the hub's own scheme, host and port: refused"
                )
            return url
    return None


def store_dir_name(repo: str) -> str:
    owner, name = check_repo_id(repo).split("/")
    return f"{owner}__{name}"


def join_inside(folder: Path, repo_path: str) -> Path:
    """folder / repo_path, refusing a name that would leave folder."""
    target = folder.joinpath(*safe_repo_path(repo_path).split("/"))
    if not target.resolve().is_relative_to(folder.resolve()):
        raise HubError(f"{repo_path!r} would be written outside the model store: refused")
    return target
