"""chat and serve on Debian sid's llama.cpp (llama-server 0.7.x), with no llama-cpp-python installed."""

from __future__ import annotations

import json

import sidlane as lane

MESSAGES = ["Name a fruit.", "Name a color.", "Name an animal."]


def test_chat_three_turns_the_third_processes_only_its_new_tokens(sid_root):
    model = lane.model_in_root(sid_root, "smollm")
    done = lane.run(
        sid_root,
        ["edgepilot", "chat", model, "--temp", "0", "-n", "12", "--ctx", "1024", "--json"],
        input="\n".join(MESSAGES) + "\n",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["engine"]["kind"] == "tools"
    first, second, third = result["turns"]
    assert first["n_reused"] == 0 and all(t["text"].strip() for t in result["turns"])
    for before, turn in ((first, second), (second, third)):
        # everything the previous turn's prompt held comes from llama-server's cache (cache_n)
        assert turn["n_reused"] >= before["n_prompt"], (before, turn)
        assert turn["n_prompt_new"] == turn["n_prompt"] - turn["n_reused"]
    assert third["n_prompt_new"] < third["n_prompt"] // 2, third


def test_serve_answers_the_openai_client(sid_root, tmp_path):
    import openai

    model = lane.model_in_root(sid_root, "smollm")
    argv = ["edgepilot", "serve", model, "--port", "0", "--json", "--ctx", "1024", "--max-tokens", "16"]
    with lane.served(sid_root, argv, tmp_path / "serve.log") as started:
        client = openai.OpenAI(base_url=started["base_url"], api_key="none", max_retries=0, timeout=120)
        reply = client.chat.completions.create(
            model=started["model_name"],
            messages=[{"role": "user", "content": "What is the capital of France?"}],
            max_tokens=8,
            temperature=0,
        )
        assert reply.choices[0].message.content.strip()
        assert reply.usage.completion_tokens > 0
        stream = client.chat.completions.create(
            model=started["model_name"],
            messages=[{"role": "user", "content": "Count to three."}],
            max_tokens=8,
            temperature=0,
            stream=True,
        )
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices).strip()
