"""Every real failure log in tests/logs ranks its cause first, quotes its evidence, gives a concrete fix."""

from __future__ import annotations

import re

import pytest
from doctorkit import LOGS, diagnose_log

from edgepilot.doctor.rules_memory import PRESSURE_TITLE
from edgepilot.doctor.types import TITLES

# file -> (cause ranked first, a piece of the log it must quote, a piece of the fix)
EXPECTED = {
    "killed-rknn-lmkd.txt": ("killed-by-system", "lowmemorykiller: Kill", "logcat"),
    "killed-oom-dmesg.txt": ("killed-by-system", "Out of memory: Killed process", "-c"),
    "killed-executorch-lmkd.txt": ("killed-by-system", "lmkd", "edgepilot fit"),
    "alloc-compute-llamafile-501.txt": ("out-of-memory-alloc", "failed to allocate CPU buffer", "-ub 128"),
    "alloc-aligned-malloc-10956.txt": ("out-of-memory-alloc", "insufficient memory", "-ctk q8_0"),
    "ctx-kv-1m-8101.txt": ("context-too-large", "failed to allocate buffer for kv cache", "-c "),
    "corrupt-bounds-moly-13.txt": ("model-corrupt", "not within the file bounds", "sha256sum"),
    "corrupt-lfs-pointer-minicpm-250.txt": (
        "model-corrupt",
        "invalid magic characters 'vers'",
        "git lfs pull",
    ),
    "corrupt-old-ggml-3492.txt": ("model-corrupt", "invalid magic number 67676a74", "convert_hf_to_gguf"),
    "bits32-i686-bounds-ollama-6228.txt": ("userland-32bit", "i686-w64-mingw32", "64-bit"),
    "fuse-shared-storage-7016.txt": ("slow-storage-fuse", "shared storage", "cp "),
    "fuse-sdcard-direct-io-18766.txt": ("slow-storage-fuse", "read error: Invalid argument", "--mmap"),
    "sigill-android-12393.txt": (
        "illegal-instruction",
        "SIGILL",
        "-DGGML_CPU_ALL_VARIANTS=ON -DGGML_BACKEND_DL=ON",
    ),
    # never the native build again: it may be what crashed (the AMX VM of issue 40)
    "sigill-gdb-alpaca-170.txt": ("illegal-instruction", "Illegal instruction", "-DGGML_NATIVE=OFF"),
    "vk-too-old-abort.txt": ("vulkan-api-too-old", "Vulkan 1.2 required", "--device none"),
    "vk-too-old-mali-g78.txt": ("vulkan-api-too-old", "no usable GPU found", "-ngl 0"),
    "vk-null-whisper-3590.txt": ("vulkan-null-function", "getBufferAddress", "vkGetBufferDeviceAddress"),
    "vk-null-tombstone-box-121.txt": ("vulkan-null-function", "pc 0000000000000000", "-ngl 0"),
    "vk-device-lost-mali-g715-10406.txt": ("vulkan-device-lost", "ErrorDeviceLost", "-ngl 0 --device none"),
    "vk-device-lost-adreno-12139.txt": ("vulkan-device-lost", "vk::DeviceLostError", "-ub 32"),
    "rpc-refused-12385.txt": ("rpc-helper-unreachable", "Failed to connect to :50052", "rpc-server"),
    "rpc-refused-local.txt": ("rpc-helper-unreachable", "Failed to connect to 127.0.0.1:50199", "nc -z"),
    "rpc-crashed-14076.txt": ("rpc-helper-lost", "Remote RPC server crashed", "cluster plan"),
    "rpc-helper-killed-local.txt": ("rpc-helper-lost", "Remote RPC server crashed", "rpc-server"),
    "rpc-version-mismatch-local.txt": ("rpc-version-mismatch", "RPC handshake failed", "edgepilot build"),
    "thermal-kernel-throttle.txt": ("thermal-throttling", "cpu clock throttled", "cool"),
    "thermal-rpi-get-throttled.txt": ("thermal-throttling", "throttled=0x80000", "vcgencmd get_throttled"),
    "threads-rk3588-bench-6915.txt": ("too-many-threads", "3.63 with 8", "-t 4"),
    "threads-orangepi5-7176.txt": ("too-many-threads", "too many cores", "taskset"),
    "phantom-termux-2366.txt": (
        "background-killed",
        "Trimming phantom processes",
        "settings_enable_monitor_phantom_procs",
    ),
    "phantom-signal9.txt": ("background-killed", "Process completed (signal 9)", "termux-wake-lock"),
    "background-empty-3106.txt": ("background-killed", "empty #17", "max_phantom_processes 2147483647"),
    "accel-opencl-mali.txt": ("accelerator-unsupported", "unsupported GPU", "Adreno"),
    "accel-nnapi-tflite-27983.txt": ("accelerator-unsupported", "not delegated to NNAPI", "CPU"),
    "vllm-avx512-5317.txt": ("framework-needs-x86", "requires AVX512", "llama.cpp"),
    "arch-unknown-local.txt": ("architecture-unsupported", "unknown model architecture", "--engine tools"),
    "arch-unknown-llama-server-local.txt": (
        "architecture-unsupported",
        "'futurearch'",
        "pkg upgrade llama-cpp",
    ),
    "engine-library-mismatch-local.txt": (
        "engine-library-mismatch",
        "undefined symbol: llama_max_devices",
        "LLAMA_CPP_LIB_PATH",
    ),
    "vllm-mavx2-aarch64-20523.txt": ("framework-needs-x86", "-mavx2", "GGUF"),
    "unknown-vulkan-ok-granite.txt": ("unknown", "log: 24 lines", "edgepilot doctor --"),
    # The GPU lane's lying layer (tests/gpu): Debian's llama.cpp 0.7.0 on an "old Mali" over lavapipe.
    "vulkan-bda-null-sigsegv.txt": ("vulkan-driver-crash", "ggml_vulkan: 0 = Mali-G77 MC9", "-dev none"),
    "vulkan-create-device-sigsegv.txt": ("vulkan-driver-crash", "using device Vulkan0", "-ngl 0"),
    "vulkan-offload-oom-killed.txt": ("killed-by-system", "on Vulkan0: model 92 MiB", "-ngl 15"),
    "vulkan-bench-gpu-slower.txt": ("gpu-slower-than-cpu", "CPU 138.0 t/s, Vulkan0 3.2", "-dev none"),
    "vulkan-lavapipe-offload-ok.txt": ("unknown", "exit status 0", "edgepilot doctor --"),
    "vulkan-lavapipe-bench-ok.txt": ("unknown", "log: 21 lines", "edgepilot doctor --"),
}
# The exit status that goes with a log (what `--exit-code` would say); the others were diagnosed without one.
EXIT_CODES = {
    "vulkan-bda-null-sigsegv.txt": 139,
    "vulkan-create-device-sigsegv.txt": 139,
    "vulkan-offload-oom-killed.txt": 137,
    "vulkan-lavapipe-offload-ok.txt": 0,
}
# These need the device they came from (tests/devices) to be told apart: see test_device_evidence.py.
NEEDS_DEVICE = {"bits32-mapview-4521.txt", "threads-rk3588-system-info-722.txt"}
# The lying layer's runs that say little themselves (a kernel line, the few lines before a crash, vulkaninfo's
# device block): tests/doctor/test_vulkan_crash.py pairs them with the "Mali" device they ran on.
NEEDS_DEVICE |= {
    "vulkan-bda-completion-sigsegv.txt",
    "vulkan-enumerate-sigsegv.txt",
    "vulkan-bda-null-dmesg.txt",
    "vulkan-bda-vulkaninfo.txt",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_log_ranks_its_cause_first(name):
    want, quoted, fix_part = EXPECTED[name]
    d = diagnose_log(name, exit_code=EXIT_CODES.get(name))
    top = d.causes[0]
    assert top.id == want, [(c.id, c.score) for c in d.causes]
    assert top.title == TITLES[want] or (name, top.title) == ("killed-executorch-lmkd.txt", PRESSURE_TITLE)
    assert any(quoted in e for e in top.evidence), top.evidence
    assert fix_part in top.fix, top.fix


def test_every_cause_id_has_a_real_log():
    # `succeeded` is a supervised run's exit status 0, not a log (test_supervise.py)
    # rpc-link-slow compares a run with the plan `cluster plan --link` recorded: a log alone cannot show it
    # (tests/cluster/test_link_verdict.py runs it for real: a pool behind a relay slower than planned)
    # speculation-slower-than-plain reads the bench history's speculation trial, which `doctor --model` adds:
    # no log shows it (tests/doctor/test_speculation_history.py, tests/speculation/test_tune_speculation.py)
    from_elsewhere = {"succeeded", "rpc-link-slow", "speculation-slower-than-plain"}
    assert {v[0] for v in EXPECTED.values()} == set(TITLES) - from_elsewhere


def test_every_log_is_tested_and_has_a_source():
    files = {p.name for p in LOGS.glob("*.txt")}
    assert files == set(EXPECTED) | NEEDS_DEVICE
    listed = set(re.findall(r"^\| ([\w.-]+\.txt) \|", (LOGS / "SOURCE.md").read_text(), re.M))
    assert listed == files


def test_fixes_name_a_command_or_flag():
    for name in EXPECTED:
        for c in diagnose_log(name).causes:
            assert "`" in c.fix or re.search(r"(^|\s)-[-a-z]", c.fix), (name, c.id, c.fix)
