"""serve logs one line per request on stderr (method, path, status, tokens, time) unless --quiet; the status
page's own polling only with --verbose. Before: nothing per request without --verbose, and no tokens."""

from __future__ import annotations

import json
import re
import time

from servekit import start_server

LINE = re.compile(r"^\d\d:\d\d:\d\d (GET|POST) (\S+) (\d{3})(?: · (~?)(\d+) tok)? · (\d+\.\d\d) s$")


def _new_lines(served, before: int, count: int, timeout: float = 20) -> list[tuple]:
    """The request lines logged after the first `before` ones, once there are `count` of them."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [m.groups() for ln in served.stderr().splitlines() if (m := LINE.match(ln))][before:]
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)


def _logged(served) -> int:
    return len(_new_lines(served, 0, 0, timeout=0))


def test_each_request_is_one_line_with_its_tokens(served):
    before = _logged(served)
    code, reply, _ = served.chat({"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 6})
    assert code == 200, reply
    body = {"prompt": "1, 2, 3,", "max_tokens": 5, "stream": True}
    code, _, raw = served.request("POST", "/v1/completions", body, served.auth())
    assert code == 200
    texts = [json.loads(ln[6:])["choices"][0]["text"] for ln in raw.decode().splitlines() if ln[6:7] == "{"]
    assert served.request("GET", "/no-such-endpoint")[0] == 404
    served.status()  # the status page's polling: not logged without --verbose
    lines = _new_lines(served, before, 3)
    assert len(lines) == 3, served.stderr()[-3000:]
    chat, stream, missing = lines
    assert chat[:3] == ("POST", "/v1/chat/completions", "200")
    assert chat[3:5] == ("", str(reply["usage"]["completion_tokens"]))  # exact: the reply's usage
    assert stream[:3] == ("POST", "/v1/completions", "200")
    assert stream[3:5] == ("~", str(len([t for t in texts if t])))  # a stream without usage: its chunks
    assert missing[:3] == ("GET", "/no-such-endpoint", "404") and missing[4] is None


def test_quiet_logs_no_request(smollm_path, tmp_path):
    server = start_server(smollm_path, "--ctx", "256", "--short-lane", "0", "--quiet", tmp=tmp_path, key=None)
    try:
        assert server.request("GET", "/v1/models")[0] == 200
        assert server.request("GET", "/no-such-endpoint")[0] == 404
    finally:
        assert server.stop() == 0, server.stderr()
    err = server.stderr()
    assert "stopped after" in err and "/v1/models" not in err and "/no-such-endpoint" not in err, err
