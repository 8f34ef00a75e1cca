"""Time and memory a hostile hub can cost `pull` (issue 25): a trickling server meets the request's overall
deadline (EDGEPILOT_HUB_DEADLINE, 2 s here); a listing page of 16 MiB of `{}` stays under 100 MiB of RSS
(measured in a child process); a repository of 400 GGUF files reads a bounded number of headers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hubserver import REPO, SMOL, Hub, HubFile, start
from pullkit import one_error_line, pull

from edgepilot.store.hub import HubClient
from edgepilot.store.pull import MAX_LISTING_HEADER_BYTES, MAX_PLANNED
from edgepilot.store.remote_fit import HeaderAllowance, fetch_header

DEADLINE = 2.0


@pytest.fixture
def small_hub(smollm_path, monkeypatch, tmp_path):
    state = Hub(repos={REPO: {SMOL: HubFile(smollm_path)}})
    server, url = start(state)
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("EDGEPILOT_MODELS_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("EDGEPILOT_HUB_DEADLINE", str(DEADLINE))
    yield state
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("trickle", "args"),
    [
        ("listing-head", [REPO]),  # the status line and headers of the listing, a byte at a time
        ("listing-body", [REPO]),
        ("cdn-body", [REPO, "--budget", "1GiB"]),  # a GGUF header read for the listing
        ("cdn-body", [REPO, SMOL]),  # the download itself: fewer than 256 KiB per deadline
    ],
)
def test_a_trickling_hub_is_one_line_within_the_deadline(small_hub, cli_app, trickle, args):
    small_hub.trickle = trickle
    started = time.monotonic()
    line = one_error_line(pull(cli_app, *args))
    elapsed = time.monotonic() - started
    assert elapsed < DEADLINE + 10, elapsed  # the server would trickle for a minute
    assert "within 2 s" in line or "in 2 s" in line or "HubTimeout" in line, line
    if args[-1] == SMOL:  # the part is kept for the next pull to resume
        assert "pull again to resume" in line


def test_a_redirect_body_is_not_read(small_hub, cli_app):
    small_hub.trickle = "redirect-body"  # resolve's 302 carries a body that would take a minute
    started = time.monotonic()
    res = pull(cli_app, REPO, "--budget", "1GiB", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["candidates"][0]["fits"] is True
    assert time.monotonic() - started < DEADLINE + 10


def test_a_bad_deadline_setting_is_one_line(small_hub, cli_app, monkeypatch):
    for value in ("0", "-1", "nan", "inf", "1e400", "soon"):
        monkeypatch.setenv("EDGEPILOT_HUB_DEADLINE", value)
        assert "EDGEPILOT_HUB_DEADLINE" in one_error_line(pull(cli_app, REPO))


CHILD = textwrap.dedent(
    """
    import resource, sys
    from edgepilot.errors import UserError
    from edgepilot.store.hub import HubClient
    try:
        files = HubClient(sys.argv[1]).list_files(sys.argv[2])
        outcome = f"{len(files)} files"
    except UserError as exc:
        outcome = str(exc)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, outcome)
    """
)


def listing_rss(url: str) -> tuple[int, str]:
    """(peak RSS, outcome) of a listing in a fresh process. Linux carries ru_maxrss across exec from the
    address space being replaced, and subprocess's vfork shares pytest's (hundreds of MiB of models): so the
    child is forked by a shell (a small address space), which `; exit` keeps from exec'ing it directly."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    out = subprocess.run(
        ["sh", "-c", '"$@"; exit $?', "sh", sys.executable, "-c", CHILD, url, REPO],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    rss_kib, outcome = out.stdout.split(" ", 1)
    return int(rss_kib) << 10, outcome.strip()


@pytest.mark.parametrize("size", [16 << 20, (8 << 20) - 2, 2 << 20])
def test_a_listing_page_of_empty_objects_stays_under_100_mib(small_hub, size):
    n = (size - 2) // 3
    small_hub.listing_body = b"[" + b",".join([b"{}"] * n) + b"]"  # `[{},{},...]`: 16 MiB cost 835 MiB
    rss, outcome = listing_rss(small_hub.url)
    assert "refused" in outcome, outcome
    assert rss < 100 << 20, (rss >> 20, outcome)


def test_a_listing_page_of_other_cheap_values_stays_under_100_mib(small_hub):
    small_hub.listing_body = b"[" + b",".join([b"[[]]"] * ((8 << 20) // 6)) + b"]"
    rss, outcome = listing_rss(small_hub.url)
    assert "refused" in outcome and rss < 100 << 20, (rss >> 20, outcome)


def test_a_repository_of_400_gguf_files_reads_a_bounded_number_of_headers(smollm_path, cli_app, monkeypatch):
    files = {f"model-{i:03d}.Q4_1.gguf": HubFile(smollm_path, sha256="ab" * 32) for i in range(400)}
    state = Hub(repos={REPO: files}, page=1000)
    server, url = start(state)
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    try:
        res = pull(cli_app, REPO, "--budget", "1GiB", "--json")
    finally:
        server.shutdown()
        server.server_close()
    assert res.exit_code == 0, res.output
    candidates = json.loads(res.stdout)["candidates"]
    assert len(candidates) == 400
    planned = [c for c in candidates if c["fits"] is not None]
    assert len(planned) == MAX_PLANNED and all(c["fits"] for c in planned)
    skipped = [c for c in candidates if c["fits"] is None]
    assert all("not planned" in c["reason"] and "pull it by name" in c["reason"] for c in skipped)
    assert state.cdn_bytes <= MAX_PLANNED * (2 << 20) < MAX_LISTING_HEADER_BYTES  # ~800 MiB before


def test_header_reads_stop_at_the_listings_allowance(small_hub, tmp_path):
    client = HubClient()
    file = next(f for f in client.list_files(REPO) if f.path == SMOL)
    allowance = HeaderAllowance(3 << 20)
    fetch_header(client, REPO, file, "main", tmp_path, allowance)  # SmolLM2's header fits in 2 MiB
    assert allowance.left == 1 << 20
    with pytest.raises(Exception, match="header"):
        fetch_header(client, REPO, file, "main", tmp_path, allowance)  # 1 MiB cannot hold it
    assert allowance.left == 0
    with pytest.raises(Exception, match="used up"):
        fetch_header(client, REPO, file, "main", tmp_path, allowance)
    assert small_hub.cdn_bytes == 3 << 20
