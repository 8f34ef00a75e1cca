"""The OpenAI-compatible API of a real `edgepilot serve`, through the `openai` client and raw HTTP."""

from __future__ import annotations

import json

import openai
import pytest
from servekit import SHARED_MAX_TOKENS

CHAT = [{"role": "user", "content": "Name three fruits."}]


def test_models_lists_the_served_model(served):
    models = served.client().models.list()
    assert [m.id for m in models.data] == ["SmolLM2-135M-Instruct.Q4_1.gguf"]


def test_chat_answers(served):
    reply = served.client().chat.completions.create(model="any", messages=CHAT, max_tokens=24, temperature=0)
    choice = reply.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    assert 0 < reply.usage.completion_tokens <= 24
    assert reply.usage.prompt_tokens > 5  # the chat template wrapped the message


def test_chat_streams_the_same_text(served):
    client = served.client()
    whole = client.chat.completions.create(model="any", messages=CHAT, max_tokens=24, temperature=0)
    stream = client.chat.completions.create(
        model="any",
        messages=CHAT,
        max_tokens=24,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces, finish, usage = [], None, None
    for chunk in stream:
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage
    assert len([p for p in pieces if p]) > 1  # really streamed, piece by piece
    assert "".join(pieces) == whole.choices[0].message.content
    assert finish == whole.choices[0].finish_reason
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens


def test_completion_with_stop_string(served):
    client = served.client()
    free = client.completions.create(model="any", prompt="1, 2, 3, 4,", max_tokens=12, temperature=0)
    text = free.choices[0].text
    # a stop string the greedy continuation is sure to contain, whatever words this machine's kernels give:
    # its own second half (spanning tokens, as a stop string may)
    stop = text[len(text) // 2 :]
    assert stop.strip(), text
    cut = client.completions.create(
        model="any", prompt="1, 2, 3, 4,", max_tokens=12, temperature=0, stop=[stop]
    )
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].text == text[: text.index(stop)]  # what came before it, not it nor what follows


def test_conversation_with_system_and_history(served):
    messages = [
        {"role": "system", "content": "You answer in one word."},
        {"role": "user", "content": "What colour is the sky?"},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": [{"type": "text", "text": "And grass?"}]},
    ]
    reply = served.client().chat.completions.create(
        model="any", messages=messages, max_tokens=8, temperature=0
    )
    assert reply.choices[0].message.content.strip()


def test_max_tokens_is_clamped_to_the_server_bound(served):
    reply = served.client().completions.create(
        model="any", prompt="Once upon a time", max_tokens=100_000, temperature=0.9, seed=3
    )
    assert reply.usage.completion_tokens <= SHARED_MAX_TOKENS


def test_missing_or_wrong_key_gets_401(served):
    import openai as oa

    wrong = oa.OpenAI(base_url=served.base_url, api_key="not-the-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.chat.completions.create(model="any", messages=CHAT, max_tokens=4)
    code, headers, body = served.request("POST", "/v1/chat/completions", {"messages": CHAT})
    assert code == 401 and headers.get("www-authenticate") == "Bearer"
    assert json.loads(body)["error"]["code"] == "invalid_api_key"
    code, _, _ = served.request("GET", "/v1/models", headers={"Authorization": f"Basic {served.key}"})
    assert code == 401
    assert served.request("GET", "/status.json")[0] == 401


def test_health_and_page_need_no_key(served):
    code, _, body = served.request("GET", "/health")
    assert code == 200 and json.loads(body)["status"] == "ok"
    code, headers, body = served.request("GET", "/")
    assert code == 200 and b"edgepilot serve" in body
    assert "script-src 'self'" in headers["content-security-policy"]


def test_bad_requests_are_one_clear_error(served):
    auth = served.auth()
    code, _, body = served.request("POST", "/v1/chat/completions", {"messages": CHAT, "n": 2}, auth)
    assert code == 400 and "n > 1" in json.loads(body)["error"]["message"]
    code, _, body = served.request("POST", "/v1/chat/completions", {"messages": []}, auth)
    assert code == 400
    code, _, _ = served.request(
        "POST", "/v1/chat/completions", b"{not json", {**auth, "Content-Type": "application/json"}
    )
    assert code == 400
    code, _, _ = served.request(
        "POST", "/v1/completions", b'{"prompt": "x"}', {**auth, "Content-Type": "text/plain"}
    )
    assert code == 415  # a cross-site form post cannot reach the model
    code, _, body = served.request("GET", "/v1/nothing", headers=auth)
    assert code == 404 and json.loads(body)["error"]["code"] == "not_found"
    code, _, _ = served.request("GET", "/v1/chat/completions", headers=auth)
    assert code == 405


def test_prompt_longer_than_the_context_is_400(served):
    long_prompt = "word " * 2000
    code, _, body = served.request(
        "POST", "/v1/completions", {"prompt": long_prompt, "max_tokens": 4}, served.auth()
    )
    assert code == 400
    assert json.loads(body)["error"]["code"] == "context_length_exceeded"


def test_body_size_is_bounded(served):
    big = {"prompt": "x" * (100 * 1024), "max_tokens": 1}
    code, _, body = served.request("POST", "/v1/completions", big, served.auth())
    assert code == 413 and "--max-body" in json.loads(body)["error"]["message"]


def test_foreign_host_header_is_refused(served):
    # DNS rebinding: a web page whose name now points at 127.0.0.1 must not read the model's answers.
    code, _, _ = served.request("GET", "/v1/models", headers={**served.auth(), "Host": "evil.example:80"})
    assert code == 403
    code, _, _ = served.request(
        "GET", "/v1/models", headers={**served.auth(), "Host": f"localhost:{served.port}"}
    )
    assert code == 200


def test_status_reports_the_engine(served):
    served.client().chat.completions.create(model="any", messages=CHAT, max_tokens=8)
    status = served.status()
    assert status["phase"] == "ready"
    assert status["worker"]["n_ctx"] == 512
    assert status["engine"]["requests"] >= 1 and status["engine"]["avg_gen_tps"] > 0
    assert status["requests"]["ok"] >= 1 and status["requests"]["unauthorized"] >= 1
    assert status["worker_rss_bytes"] > 50 << 20
    assert status["pressure"]["available_bytes"] > 0
    # the key never appears in what the server says or logs
    assert served.key not in json.dumps(status) and served.key not in served.stderr()
