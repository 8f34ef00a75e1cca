"""Stand-ins for llama.cpp's programs in the GPU driver check tests: shell scripts that list a device as
`llama-server --list-devices` does and then, as llama-bench, behave like a driver: crash with SIGSEGV, hang,
spin (busy past any deadline), start slowly, fail, flood their output, or pass. They test edgepilot's
isolation, not llama.cpp."""

from __future__ import annotations

import stat
from pathlib import Path

DEVICE_LINE = (
    "ggml_vulkan: 0 = Mali-G77 MC9 (Mali-G77) | uma: 1 | fp16: 1 | bf16: 0 | warp size: 16 | "
    "shared memory: 32768 | int dot: 0 | matrix cores: none"
)
LISTING = "Available devices:\n  Vulkan0: Mali-G77 MC9 (7245 MiB, 5120 MiB free)\n"

BEHAVIOUR = {
    "segv": f'echo "{DEVICE_LINE}" >&2\necho "load_tensors: loading model" >&2\nkill -SEGV $$\n',
    "abort": f'echo "{DEVICE_LINE}" >&2\nkill -ABRT $$\n',
    # a driver stuck in a shader compile, with a helper process of its own that must die with it
    "hang": 'sleep 300 &\necho $! > "$HERE/grandchild.pid"\nsleep 300\n',
    "fail": (
        f'echo "{DEVICE_LINE}" >&2\n'
        'echo "ggml_vulkan: Device memory allocation of size 3997696 failed." >&2\n'
        'echo "llama_model_load: error loading model: vk::Device::allocateMemory: '
        'ErrorOutOfDeviceMemory" >&2\n'
        "exit 1\n"
    ),
    "ok": (
        f'echo "{DEVICE_LINE}" >&2\n'
        'echo "load_tensors:      Vulkan0 model buffer size =     3.81 MiB" >&2\n'
        'echo "llama_kv_cache:    Vulkan0 KV buffer size =     0.25 MiB" >&2\n'
        'echo "| model | size | test | t/s |"\n'
        "exit 0\n"
    ),
    # a driver compiling its pipelines: busy on the CPU, no end
    "spin": f'echo "{DEVICE_LINE}" >&2\nwhile :; do :; done\n',
    # the same for $SPIN_S seconds (default 2), then it passes: a slow start on a cold shader cache
    "slow-ok": (
        f'echo "{DEVICE_LINE}" >&2\n'
        'end=$(( $(date +%s) + ${SPIN_S:-2} )); while [ "$(date +%s)" -lt "$end" ]; do i=0; '
        "while [ $i -lt 2000 ]; do i=$((i+1)); done; done\n"
        'echo "load_tensors:      Vulkan0 model buffer size =     3.81 MiB" >&2\n'
        "exit 0\n"
    ),
    # 40 MiB without a newline, then a crash: the check reads it in bounded pieces
    "flood": 'head -c 41943040 /dev/zero | tr "\\0" "x"\nkill -SEGV $$\n',
}


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + f'HERE="{path.parent}"\n' + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_tools(folder: Path, mode: str, listing: str = LISTING) -> Path:
    """A folder with llama-server (lists `listing`) and llama-bench (behaves as `mode`); returns the server.
    Each llama-bench run appends a line to folder/calls."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "listing.txt").write_text(listing)
    server = _script(
        folder / "llama-server",
        'case "$*" in\n'
        '  *--list-devices*) cat "$HERE/listing.txt"; exit 0;;\n'
        '  *--version*) echo "version: 9999 (fakecommit)" >&2; exit 0;;\n'
        "esac\nexit 1\n",
    )
    _script(
        folder / "llama-bench",
        'case "$*" in *--version*) echo "version: 9999 (fakecommit)" >&2; exit 0;; esac\n'
        'echo "$*" >> "$HERE/calls"\n' + BEHAVIOUR[mode],
    )
    return server


def calls(folder: Path) -> int:
    path = folder / "calls"
    return len(path.read_text().splitlines()) if path.exists() else 0
