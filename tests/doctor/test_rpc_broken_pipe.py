"""A helper killed while llama.cpp was writing to it: llama-completion dies of SIGPIPE with no line of its
own (seen in tests/cluster/test_run_rpc.py one run in two). The doctor still names the lost helper, from the
signal and the command's --rpc; without --rpc a SIGPIPE is not an RPC matter."""

from __future__ import annotations

import signal

from edgepilot.doctor.diagnose import diagnose

LOG = [
    "0.00.547.840 I generate: n_ctx = 512, n_batch = 512, n_predict = 2000, n_keep = 0",
    "0.00.547.841 I ",
]
COMMAND = ["llama-completion", "-m", "m.gguf", "--rpc", "127.0.0.1:50052,127.0.0.1:50053", "-n", "2000"]


def test_a_broken_pipe_over_rpc_is_the_lost_helper():
    top = diagnose(LOG, exit_code=-signal.SIGPIPE, command=COMMAND).top
    assert top.id == "rpc-helper-lost", top
    assert any("SIGPIPE" in line and "--rpc helper" in line for line in top.evidence), top.evidence
    assert "127.0.0.1:50052,127.0.0.1:50053" in " ".join(top.evidence)


def test_a_broken_pipe_without_rpc_is_not_an_rpc_cause():
    top = diagnose(LOG, exit_code=-signal.SIGPIPE, command=COMMAND[:3]).top
    assert not top.id.startswith("rpc-"), top
