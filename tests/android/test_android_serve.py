"""`edgepilot serve` on the SIMULATED Android interpreter (sim/sitecustomize.py; PEP 738's platform, not a
phone), its in-process worker included, answering the official OpenAI client."""

from __future__ import annotations

from servekit import start_server
from simkit import sim_pythonpath


def test_serve_answers_the_openai_client(smollm_path, tmp_path):
    env = {"PYTHONPATH": sim_pythonpath()}  # the server and its worker run on the simulation
    server = start_server(smollm_path, "--ctx", "512", "--engine", "inprocess", tmp=tmp_path, env=env)
    try:
        reply = server.client().chat.completions.create(
            model="any", messages=[{"role": "user", "content": "Say hello."}], max_tokens=8, temperature=0
        )
        assert reply.choices[0].message.content.strip()
        assert 0 < reply.usage.completion_tokens <= 8
    finally:
        code = server.stop()
    assert code == 0, server.stderr()[-3000:]
    assert "Traceback" not in server.stderr()
