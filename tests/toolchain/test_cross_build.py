"""`edgepilot build --target aarch64`: a phone's llama.cpp tools, cross-built on this desktop, run under
qemu-user with the ISA paths they were built for, and die with SIGILL on a CPU without them (the doctor names
it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from click.testing import CliRunner


def _qemu(build, cpu: str, *args: str) -> subprocess.CompletedProcess:
    bin_dir = Path(build.tools["llama-completion"]).parent
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env.update(QEMU_LD_PREFIX="/usr/aarch64-linux-gnu", QEMU_CPU=cpu)
    cmd = ["qemu-aarch64-static", str(bin_dir / args[0]), *args[1:]]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def test_cross_built_tools_are_arm64_and_generate_under_qemu(aarch64_build, smollm_path):
    completion = Path(aarch64_build.tools["llama-completion"])
    assert completion.read_bytes()[:20][18] == 0xB7  # ELF e_machine EM_AARCH64 (183)
    done = _qemu(
        aarch64_build,
        "max",
        "llama-completion",
        "-m",
        str(smollm_path),
        "-p",
        "Count: one, two,",
        "-n",
        "4",
        "--temp",
        "0",
        "-no-cnv",
        "--ignore-eos",
        "-c",
        "128",
        "--no-warmup",
    )
    assert done.returncode == 0, done.stderr[-600:]
    assert done.stdout.startswith("Count: one, two,") and len(done.stdout) > len("Count: one, two,")
    # the dot-product and int8-matmul kernels it was built for are the ones that ran
    assert "DOTPROD = 1" in done.stderr and "MATMUL_INT8 = 1" in done.stderr
    helper = _qemu(aarch64_build, "max", "rpc-server", "--help")
    assert "usage" in (helper.stdout + helper.stderr).lower()


def test_an_i8mm_build_on_a_cortex_a53_dies_with_sigill_and_the_doctor_says_so(
    aarch64_build, smollm_path, cli_app, tmp_path
):
    done = _qemu(
        aarch64_build,
        "cortex-a53",
        "llama-completion",
        "-m",
        str(smollm_path),
        "-p",
        "Hi",
        "-n",
        "2",
        "-no-cnv",
        "-c",
        "128",
        "--no-warmup",
    )
    assert done.returncode in (-signal.SIGILL, 128 + signal.SIGILL), (done.returncode, done.stderr[-400:])
    log = tmp_path / "a53.log"
    log.write_text(done.stderr)
    res = CliRunner().invoke(cli_app, ["doctor", "--log", str(log), "--exit-code", "132", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["causes"][0]["id"] == "illegal-instruction"
