"""Evidence from the device (tests/devices trees) and the model file, combined with real logs."""

from __future__ import annotations

from doctorkit import DEVICES, diagnose_log

from edgepilot.doctor.diagnose import diagnose


def test_all_cores_on_rk3588_is_too_many_threads_with_a_taskset_fix():
    d = diagnose_log("threads-rk3588-system-info-722.txt", "rk3588-orangepi5plus")
    top = d.causes[0]
    assert top.id == "too-many-threads"
    assert any("n_threads = 8 / 8" in e for e in top.evidence)
    assert "taskset -c 4-7" in top.fix and "-t 4" in top.fix


def test_model_on_sdcard_of_a_pixel_is_on_fuse():
    d = diagnose_log("fuse-shared-storage-7016.txt", "pixel6a-tensor-g1", model="/sdcard/Download/model.gguf")
    top = d.causes[0]
    assert top.id == "slow-storage-fuse"
    assert any("(fuse)" in e for e in top.evidence)
    assert "cp /sdcard/Download/model.gguf ~/" in top.fix


def test_model_in_termux_home_is_not_slow_storage():
    d = diagnose([], root=DEVICES / "pixel6a-tensor-g1", model="/data/data/com.termux/files/home/m.gguf")
    assert "slow-storage-fuse" not in [c.id for c in d.causes]


def test_32bit_termux_device_is_evidence():
    d = diagnose_log("bits32-mapview-4521.txt", "redmi-note8-termux32")
    top = d.causes[0]
    assert top.id == "userland-32bit"
    assert any("armv8l (32-bit)" in e for e in top.evidence)
    assert "arm64-v8a Termux APK" in top.fix


def test_vulkan_segfault_on_a_vulkan_1_1_mali_is_the_null_function():
    lines = ["ggml_vulkan: Found 1 Vulkan devices:", "Segmentation fault"]
    d = diagnose(lines, exit_code=139, root=DEVICES / "exynos990-galaxy-s20")
    top = d.causes[0]
    assert top.id == "vulkan-null-function"
    assert any("Mali-G77: Vulkan apiVersion 1.1" in e for e in top.evidence)
    assert "exit status 139 = killed by SIGSEGV (11)" in top.evidence


def test_sigill_lists_what_the_cpu_lacks():
    d = diagnose_log("sigill-android-12393.txt", "xperia10ii-sd665")
    top = d.causes[0]
    assert top.id == "illegal-instruction"
    assert any("lacks" in e and "dotprod" in e for e in top.evidence)
    assert any("-march=armv8.7a" in e for e in top.evidence)


def test_a_capped_cluster_is_a_weak_thermal_hint():
    # Pixel 6a's X1 cores run capped at 2348 of 2802 MHz in its tree: worth a line, never the diagnosis.
    d = diagnose(["something failed"], root=DEVICES / "pixel6a-tensor-g1")
    thermal = next(c for c in d.causes if c.id == "thermal-throttling")
    assert thermal.score < 40 and any("capped at 2348 of 2802 MHz" in e for e in thermal.evidence)
    assert d.causes[0].id == "unknown"


def test_a_damaged_model_file_is_validated(tmp_path, smollm_path):
    broken = tmp_path / "smol.gguf"
    broken.write_bytes(smollm_path.read_bytes()[: 1 << 20])
    d = diagnose(["llama_model_load_from_file_impl: failed to load model"], model=str(broken), root=None)
    top = d.causes[0]
    assert top.id == "model-corrupt" and top.score >= 90
    assert any("validation of" in e and "truncated" in e for e in top.evidence)
    assert f"edgepilot inspect {broken} --sha256" in top.fix


def test_a_git_lfs_pointer_is_named(tmp_path):
    pointer = tmp_path / "model.gguf"
    pointer.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123\n")
    d = diagnose(["gguf_init_from_file: invalid magic characters 'vers'"], model=str(pointer), root=None)
    assert d.causes[0].id == "model-corrupt"
    assert "git lfs pull" in d.causes[0].fix


def test_a_snapshot_archive_is_read_like_a_tree(tmp_path):
    import tarfile

    archive = tmp_path / "pixel.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(DEVICES / "pixel6a-tensor-g1", arcname=".")
    d = diagnose(["load time = 31000.00 ms"], root=archive, model="/sdcard/Download/m.gguf")
    top = d.causes[0]
    assert top.id == "slow-storage-fuse" and any("(fuse)" in e for e in top.evidence)


def test_a_run_that_heated_the_device_is_thermal_evidence():
    from edgepilot.doctor.types import DeviceState, RunRecord

    def state(celsius: float) -> DeviceState:
        return DeviceState(2 << 30, 0.0, 0.0, celsius, "thermal_zone1 (cpu-1-0-usr)")

    run = RunRecord(["llama-bench"], 0, 0, None, None, 300.0, 500 << 20, state(41.0), state(88.5))
    d = diagnose(["| model | size | params | backend | threads | test | t/s |"], run=run, root=None)
    thermal = next(c for c in d.causes if c.id == "thermal-throttling")
    assert any("41.0 °C before the run, 88.5 °C after" in e for e in thermal.evidence)
    assert d.causes[0].id == "thermal-throttling"
