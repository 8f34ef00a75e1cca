"""List/range parsing, pinning, sensors, roofline, formats: the pieces of bench without a model run."""

from __future__ import annotations

import os
import threading
from dataclasses import replace

import pytest

from edgepilot.bench.monitor import Reading, Sensors, cool_down, throttle_verdict
from edgepilot.bench.ranges import parse_bool_list, parse_int_list
from edgepilot.device.cpusets import cpu_mask, cpulist, parse_cpulist
from edgepilot.errors import UserError
from edgepilot.plan.roofline import Bandwidth, bytes_per_token, roofline_fraction
from edgepilot.tuned.pinning import allowed_cpus, pin_process, pinned, thread_affinities


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4", [4]),
        ("2,4", [2, 4]),
        ("1-4", [1, 2, 3, 4]),
        ("1-8+2", [1, 3, 5, 7]),
        ("1-16*2", [1, 2, 4, 8, 16]),
        ("2,1-3", [2, 1, 3]),  # llama-bench keeps the given order; duplicates dropped
        (" 8 , 16 ", [8, 16]),
    ],
)
def test_int_lists_like_llama_bench(text, expected):
    assert parse_int_list(text, "-t") == expected


@pytest.mark.parametrize(
    "text", ["", "a", "1-", "-1", "4-2", "1-8+0", "1-8*1", "0-4*2", "1,,2", "1.5", "1-9999999"]
)
def test_bad_int_lists_are_user_errors(text):
    with pytest.raises(UserError) as err:
        parse_int_list(text, "-t")
    assert err.value.args[0].startswith("-t")


def test_minimum_is_enforced():
    with pytest.raises(UserError, match="too small"):
        parse_int_list("0,2", "-t", minimum=1)


def test_bool_lists():
    assert parse_bool_list("0,1", "-fa") == [False, True]
    assert parse_bool_list("on", "-fa") == [True]
    with pytest.raises(UserError):
        parse_bool_list("maybe", "-fa")


def test_cpulists_round_trip():
    assert parse_cpulist("0-3,6") == [0, 1, 2, 3, 6]
    assert cpulist([6, 0, 1, 2, 3]) == "0-3,6"
    assert cpulist([7]) == "7"
    assert cpu_mask([4, 5, 6, 7]) == "0xf0" and cpu_mask(None) == "0x0"
    for bad in ("3-1", "a", "1-"):
        with pytest.raises(ValueError):
            parse_cpulist(bad)


def test_pinning_moves_every_thread_and_new_threads_inherit():
    cpus = allowed_cpus()
    ready, done = threading.Event(), threading.Event()
    worker = threading.Thread(target=lambda: (ready.set(), done.wait(5)))
    worker.start()
    ready.wait(5)
    try:
        with pinned([cpus[0]]):
            assert set(thread_affinities()[worker.native_id]) == {cpus[0]}  # an existing thread moved too
            seen = []
            later = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
            later.start()
            later.join()
            assert seen == [{cpus[0]}]
        assert allowed_cpus() == cpus  # restored
    finally:
        done.set()
        worker.join()


def test_pinning_to_an_unavailable_cpu_is_a_user_error():
    with pytest.raises(UserError, match="cannot pin to CPUs 4096"):
        pin_process([4096])
    with pytest.raises(UserError):
        pin_process([])


def test_sensors_on_device_trees(devices):
    rk = Sensors.find(devices / "rk3588-orangepi5plus")
    assert rk.zones and rk.temperature() is not None and rk.battery is None
    pixel = Sensors.find(devices / "pixel6a-tensor-g1")
    assert pixel.battery == "battery" and pixel.watts() is not None and pixel.watts() > 0
    sd = Sensors.find(devices / "sd8gen2-xiaomi13pro")  # /sys/class/thermal denied by SELinux
    assert not sd.zones and any("permission denied" in n for n in sd.notes)


def test_recording_on_a_tree_averages_watts(devices):
    from edgepilot.bench.monitor import Recording

    rec = Recording(Sensors.find(devices / "pixel6a-tensor-g1"), interval=0.01).start()
    threading.Event().wait(0.05)
    reading = rec.stop()
    assert reading.watts is not None and reading.samples >= 2


def test_throttle_verdicts():
    hot = Reading(temp_start_c=40.0, temp_end_c=47.0)
    assert throttle_verdict([30, 29, 27, 25, 24, 23], hot)[0] is True
    assert throttle_verdict([30, 30, 30, 30], hot) == (False, "")
    assert throttle_verdict([30, 30, 29, 30], Reading(temp_start_c=40.0, temp_end_c=40.5)) == (False, "")
    verdict, note = throttle_verdict([30, 25, 20], Reading())
    assert verdict is None and "no temperature sensor" in note
    assert throttle_verdict([30, 20], hot) == (None, "")  # too few repetitions to tell


def test_cool_down_without_a_sensor_just_waits(devices):
    waited = cool_down(Sensors.find(devices / "sd8gen2-xiaomi13pro"), None, 0.05)
    assert waited == pytest.approx(0.05)
    rk = Sensors.find(devices / "rk3588-orangepi5plus")
    assert cool_down(rk, rk.temperature(), 5.0) < 1.0  # already at the baseline: no wait


def test_roofline_pieces(gemma_path, smollm_path):
    # Gemma 3 ties its output to the token embedding: every weight is read per token
    assert 200e6 < bytes_per_token(gemma_path) < gemma_path.stat().st_size
    assert 60e6 < bytes_per_token(smollm_path) < smollm_path.stat().st_size
    bw = Bandwidth(bytes_per_s=20e9, threads=2, buffer_bytes=64 << 20, seconds=0.2)
    assert roofline_fraction(10.0, 100_000_000, bw) == pytest.approx(0.05)
    assert roofline_fraction(10.0, None, bw) is None


def test_tuned_settings_as_a_llama_cpp_command_line():
    from edgepilot.plan.commands import llama_cpp_command
    from edgepilot.plan.settings import EngineSettings

    s = EngineSettings(n_ctx=4096, n_ubatch=256, flash_attn=True, n_threads=4)
    same = llama_cpp_command("m.gguf", s, cpus=[4, 5, 6, 7], prompt_cpus=[4, 5, 6, 7])
    assert same[:5] == ["taskset", "-c", "4-7", "llama-cli", "-m"] and "-C" not in same
    assert same[same.index("-ub") + 1] == "256" and same[same.index("-fa") + 1] == "on"
    wide = llama_cpp_command("m.gguf", replace(s, n_threads_batch=8), cpus=[4, 5, 6, 7], prompt_cpus=range(8))
    assert wide[:3] == ["taskset", "-c", "0-7"]  # the union: each phase's own set comes from the masks
    assert wide[wide.index("-C") + 1] == "0xf0" and wide[wide.index("-Cb") + 1] == "0xff"
    assert wide[wide.index("-tb") + 1] == "8" and "--cpu-strict-batch" in wide
    assert llama_cpp_command("m.gguf", replace(s, repack=False))[-1] == "--no-repack"


def test_serve_worker_gets_the_prompt_cpus_only_with_its_own_cpus(tmp_path):
    from pathlib import Path

    from edgepilot.plan.settings import EngineSettings
    from edgepilot.serve.watchdog import Launch

    settings = EngineSettings(n_ctx=256, n_threads=2)
    argv = Launch(Path("m.gguf"), "m", "s.sock", 8, cpus=[4, 5], prompt_cpus=[0, 1, 4, 5]).argv(settings)
    assert argv[argv.index("--cpus") + 1] == "4,5" and argv[argv.index("--prompt-cpus") + 1] == "0,1,4,5"
    assert "--prompt-cpus" not in Launch(Path("m.gguf"), "m", "s.sock", 8, prompt_cpus=[0, 1]).argv(settings)


@pytest.mark.parametrize(
    "points",
    [
        [(1, 160.0), (2, 90.0)],  # fewer threads faster: the best point is top left, plotext's legend corner
        [(1, 60.0), (2, 110.0), (3, 150.0), (4, 120.0)],
        [(1, 80.0), (2, 150.0), (3, 40.0)],
    ],
)
@pytest.mark.parametrize("width", [50, 100])
def test_the_legend_never_covers_the_fastest_point_and_the_title_stays(points, width):
    from edgepilot.bench.plot import Series, terminal_plot

    name = "SmolLM2-135M-Instruct.Q4_1.gguf"
    text = terminal_plot([Series("tg16 · cores 0-3", "tg", points)], name, width=width, color=False)
    assert text is not None, "plotext is part of the test extra"
    assert "generation t/s vs threads" in text  # plotext leaves out a title wider than the chart
    best_x, best_y = max(points, key=lambda p: p[1])
    # the canvas row of the best speed (its y tick), and the cells around the best point's column in it
    top = next(ln.split("┤", 1)[1] for ln in text.splitlines() if ln.lstrip().startswith(f"{best_y:.1f}┤"))
    xs = [x for x, _ in points]
    col = round((best_x - min(xs)) / (max(xs) - min(xs)) * (len(top) - 2))
    assert not set(top[max(col - 1, 0) : col + 2]) & set("┌┐│─"), text  # no legend frame over it
