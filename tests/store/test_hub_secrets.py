"""The hub token and HF_ENDPOINT against a hostile hub (issue 25): the token goes only to the endpoint's own
origin, never over http after an https hub or to another host; unsendable tokens and hostile endpoints are one
line; a password in HF_ENDPOINT never shows. The https hubs are real TLS servers with a self-signed
certificate made by openssl for this test, trusted through SSL_CERT_FILE."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from hubserver import REPO, SMOL, Hub, HubFile, start
from pullkit import one_error_line, pull

from edgepilot.errors import UserError
from edgepilot.store.hub import HubClient, next_page, read_token
from edgepilot.store.hub_net import redact, token_allowed

TOKEN = "hf_secret_token_1234"


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is needed to make the test's TLS certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def servers(smollm_path, certificate, monkeypatch, tmp_path):
    """An https hub on 127.0.0.1, and the same files on a plain http server and on https://localhost."""
    started = []

    def serve(tls: bool) -> tuple[Hub, str]:
        state = Hub(repos={REPO: {SMOL: HubFile(smollm_path)}})
        server, url = start(state, certificate if tls else None)
        started.append(server)
        return state, url

    hub, hub_url = serve(tls=True)
    plain, plain_url = serve(tls=False)
    other, other_url = serve(tls=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    monkeypatch.setenv("HF_ENDPOINT", hub_url)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("EDGEPILOT_MODELS_DIR", str(tmp_path / "store"))
    yield hub, (plain, plain_url), (other, other_url.replace("127.0.0.1", "localhost"))
    for server in started:
        server.shutdown()
        server.server_close()


def test_an_https_hub_redirecting_to_http_on_its_own_host_does_not_get_the_token_over_http(servers, cli_app):
    hub, _, _ = servers
    hub.cdn_base = hub.url.replace("https://", "http://")  # the same host and port, without TLS
    res = pull(cli_app, REPO, "--budget", "1GiB", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["candidates"][0]["fits"] is True  # its header came through the redirect
    seen = set(zip(hub.schemes, hub.authorization, strict=True))
    assert seen == {("https", f"Bearer {TOKEN}"), ("http", None)}


@pytest.mark.parametrize("target", ["plain", "other"])
def test_an_https_hub_redirecting_to_another_host_does_not_get_the_token_sent_there(servers, cli_app, target):
    hub, plain, other = servers
    cdn, cdn_url = plain if target == "plain" else other  # http://127.0.0.1:OTHER or https://localhost:OTHER
    hub.cdn_base = cdn_url
    res = pull(cli_app, REPO, "--budget", "1GiB", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["candidates"][0]["fits"] is True
    assert hub.authorization and set(hub.authorization) == {f"Bearer {TOKEN}"}  # the hub itself gets it
    assert cdn.requests and set(cdn.authorization) == {None}


@pytest.mark.parametrize("where", ["own host", "other host"])
def test_a_listing_page_on_plain_http_is_refused_without_sending_the_token(servers, cli_app, where):
    hub, (plain, plain_url), _ = servers
    hub.page = 1  # page 2 of the listing "is" at http://127.0.0.1:SAME or http://127.0.0.1:OTHER
    hub.next_base = hub.url.replace("https://", "http://") if where == "own host" else plain_url
    line = one_error_line(pull(cli_app, REPO, "--budget", "1GiB"))
    assert "next page" in line and TOKEN not in line
    assert "http" not in hub.schemes and plain.requests == []


def test_the_token_goes_only_to_the_endpoints_own_origin():
    hub = "https://hub.example"
    assert token_allowed("https://hub.example/api/x", hub)
    assert token_allowed("https://HUB.example:443/api/x", hub)
    for url in (
        "http://hub.example/api/x",  # https -> http on the same host
        "http://hub.example:443/api/x",
        "https://hub.example:8443/api/x",
        "https://cdn.example/x",
        "https://hub.example@evil.example/x",
        "https://hub.example.evil.example/x",
        "ftp://hub.example/x",
        "http://[::1",
    ):
        assert not token_allowed(url, hub), url
    local = "http://127.0.0.1:8080"  # a plain-http endpoint the user configured: exactly that origin
    assert token_allowed("http://127.0.0.1:8080/cdn/x", local)
    assert not token_allowed("http://127.0.0.1:8081/cdn/x", local)
    assert not token_allowed("http://localhost:8080/cdn/x", local)
    with pytest.raises(UserError, match="next page"):
        next_page('<http://hub.example/api/models/a/b/tree/main?cursor=2>; rel="next"', hub)
    assert next_page('</api/models/a/b/tree/main?cursor=2>; rel="next"', hub).startswith(hub + "/api/")


@pytest.mark.parametrize(
    "token",
    [
        "hf_abc\r\nX-Injected: 1",
        "hf_abc\ndef",
        "hf_\u0101bc",
        "hf_\u20acx",
        "hf_abc\x7f",
        "hf_a\x01b",
        "hf_a b",
    ],
)
def test_a_token_that_is_not_one_header_line_is_one_line(hub, cli_app, monkeypatch, token):
    monkeypatch.setenv("HF_TOKEN", token)
    line = one_error_line(pull(cli_app, REPO))
    assert "HF_TOKEN" in line and "cannot be sent" in line and token not in line
    assert hub.requests == []
    with pytest.raises(UserError, match="cannot be sent"):
        HubClient(token=token)


@pytest.mark.parametrize("content", [b"hf_a\x00b\n", b"hf_a\x7fb\n", "hf_\u0101\n".encode(), b"hf_a\x1bb\n"])
def test_a_token_file_with_control_or_non_ascii_bytes_is_one_line(hub, cli_app, tmp_path, content):
    token = tmp_path / "token"
    token.write_bytes(content)
    line = one_error_line(pull(cli_app, REPO, "--token-file", str(token)))
    assert "cannot be sent" in line and "hf_a" not in line
    assert hub.requests == []
    with pytest.raises(UserError):
        read_token(str(token))


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://user:s3cr3t-pw@{host}",
        "https://user:s3cr3t-pw@{host}",
        "http://s3cr3t-pw@{host}",
        "http://user:s3cr3t-pw@[::1",
        "http://user:s3cr3t-pw/x@{host}",
        "http://user:s3cr3t-pw@{host}:99999",
        "user:s3cr3t-pw@{host}",
    ],
)
def test_a_password_in_hf_endpoint_never_shows(hub, cli_app, monkeypatch, endpoint):
    host = os.environ["HF_ENDPOINT"].split("//")[1]
    monkeypatch.setenv("HF_ENDPOINT", endpoint.format(host=host))
    for args in ([REPO], [REPO, SMOL], [REPO, "--json"]):
        res = pull(cli_app, *args)
        one_error_line(res)
        assert "s3cr3t" not in res.output
    assert hub.requests == []
    assert "s3cr3t" not in redact(endpoint)


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://[::1",
        "http://[::1]x",
        "https://[zz::1]",
        "ftp://hub.example",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "http://",
        "http://hub.example:99999",
        "http://hub.example:port",
        "http://hub example",
        "http://h\u00e9llo.example",
        "http://hub.example/\x01",
        "http://hub.example/?q=1",
        "x" * 5000,
    ],
)
def test_a_hostile_hf_endpoint_is_one_line(cli_app, monkeypatch, endpoint):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    line = one_error_line(pull(cli_app, REPO))
    assert "HF_ENDPOINT" in line and len(line) < 400
