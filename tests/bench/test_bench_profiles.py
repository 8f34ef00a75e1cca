"""Tuned profiles: saved per (device, model), used by `run` only where the user gave nothing."""

from __future__ import annotations

import json
import os

import pytest

from edgepilot.plan.requested import RequestedSettings
from edgepilot.tuned.decide import apply_profile, decide
from edgepilot.tuned.identity import model_id
from edgepilot.tuned.pinning import allowed_cpus
from edgepilot.tuned.profiles import load_profile, profile_path, save_profile
from profilekit import make_profile


def test_no_profile_without_a_tune(gemma_path):
    assert load_profile(gemma_path) is None


def test_round_trip_and_keyed_by_device_and_model(gemma_path, smollm_path, devices):
    saved = save_profile(make_profile(gemma_path))
    assert saved.parent.name == "profiles"
    assert load_profile(gemma_path) == make_profile(gemma_path)
    assert load_profile(smollm_path) is None  # another model
    tree = devices / "rk3588-orangepi5plus"
    assert load_profile(gemma_path, root=tree) is None  # another device
    save_profile(make_profile(gemma_path, root=tree, n_threads=4, cpus=[4, 5, 6, 7]))
    assert load_profile(gemma_path, root=tree).cpus == [4, 5, 6, 7]
    assert load_profile(gemma_path).n_threads == 1  # this device's profile is still its own


def test_model_key_survives_a_copy_not_a_change(gemma_path, tmp_path):
    copy = tmp_path / "renamed.gguf"
    data = gemma_path.read_bytes()
    copy.write_bytes(data)
    assert model_id(copy).key == model_id(gemma_path).key
    changed = tmp_path / "changed.gguf"
    changed.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    assert model_id(changed).key != model_id(gemma_path).key


@pytest.mark.parametrize(
    "damage", ["{not json", json.dumps({"version": 99}), json.dumps({"version": 1, "n_threads": 0}), "[]"]
)
def test_a_damaged_profile_is_ignored(gemma_path, damage):
    p = make_profile(gemma_path)
    path = profile_path(p.model_key, p.device_fingerprint)
    path.parent.mkdir(parents=True)
    path.write_text(damage)
    assert load_profile(gemma_path) is None


def test_profile_fills_only_what_the_user_left_open(gemma_path):
    p = make_profile(gemma_path)
    assert apply_profile(RequestedSettings(), p) == RequestedSettings(
        n_threads=1, n_threads_batch=2, n_ubatch=256, flash_attn=True
    )
    mine = RequestedSettings(n_threads=2, n_ubatch=512, flash_attn=False)
    assert apply_profile(mine, p) == mine
    assert apply_profile(mine, None) == mine


def test_decide_settings_uses_the_profile(gemma_path):
    p = make_profile(gemma_path)
    plan = decide(gemma_path, RequestedSettings(), profile=p).plan
    s = plan.settings
    assert (s.n_threads, s.n_threads_batch, s.n_ubatch, s.flash_attn) == (1, 2, 256, True)
    assert any("tuned profile" in n for n in plan.notes)
    plan = decide(gemma_path, RequestedSettings(n_threads=2), profile=p).plan
    assert (plan.settings.n_threads, plan.settings.n_threads_batch) == (2, None)  # the user's -t wins
    assert plan.settings.n_ubatch == 256  # the rest of the profile still applies


def test_run_pins_to_the_profile_cpus_before_loading(gemma_path):
    from edgepilot.engine.sampling import SamplerSettings
    from edgepilot.run.runner import run_model

    cpu = allowed_cpus()[-1]
    save_profile(make_profile(gemma_path, cpus=[cpu]))
    greedy = SamplerSettings(temperature=0)
    result = run_model(
        str(gemma_path), "Hi", n_predict=4, requested=RequestedSettings(n_ctx=256), sampler=greedy
    )
    assert os.sched_getaffinity(0) == {cpu}
    assert result.settings.n_threads == 1 and result.settings.n_threads_batch == 2
    # every thread llama.cpp started (OpenMP workers included) runs on that CPU
    from edgepilot.tuned.pinning import thread_affinities

    assert {tuple(v) for v in thread_affinities().values()} == {(cpu,)}


def test_run_with_explicit_threads_does_not_pin(gemma_path):
    from edgepilot.engine.sampling import SamplerSettings
    from edgepilot.run.runner import run_model

    before = os.sched_getaffinity(0)
    save_profile(make_profile(gemma_path, cpus=[allowed_cpus()[-1]]))
    requested = RequestedSettings(n_ctx=256, n_threads=1)
    run_model(str(gemma_path), "Hi", n_predict=2, requested=requested, sampler=SamplerSettings(temperature=0))
    assert os.sched_getaffinity(0) == before


def test_profiles_without_prompt_cpus_still_load_and_use_one_set(gemma_path):
    p = make_profile(gemma_path)
    data = {k: v for k, v in json.loads(json.dumps(p.__dict__)).items() if k != "prompt_cpus"}
    path = profile_path(p.model_key, p.device_fingerprint)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))  # a profile saved before prompt CPUs existed
    loaded = load_profile(gemma_path)
    assert loaded is not None and loaded.prompt_cpus == []
    decision = decide(gemma_path, RequestedSettings(), profile=loaded)
    assert decision.prompt_cpus is None and decision.pin() is None  # no re-pinning hook: one set for both


def test_run_pins_prompt_and_generation_to_their_own_cpus(gemma_path, monkeypatch):
    from edgepilot.engine.sampling import SamplerSettings
    from edgepilot.run.runner import run_model
    from edgepilot.tuned import pinning
    from edgepilot.tuned.pinning import thread_affinities

    cpus = allowed_cpus()
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    gen_cpu = cpus[-1]
    save_profile(make_profile(gemma_path, cpus=[gen_cpu], prompt_cpus=cpus, n_threads_batch=len(cpus)))
    assert load_profile(gemma_path).prompt_cpus == cpus
    mine = decide(gemma_path, RequestedSettings(n_threads=1))
    assert (mine.cpus, mine.pin()) == (None, None)  # the user's -t: no pinning
    pins: list[list[int]] = []
    real_pin = pinning.pin_process
    monkeypatch.setattr(pinning, "pin_process", lambda c: pins.append(sorted(c)) or real_pin(c))
    while_generating: list[set] = []

    def on_text(_text: str) -> None:
        while_generating.append({tuple(v) for v in thread_affinities().values()})

    result = run_model(
        str(gemma_path),
        "Write a sentence about phones. " * 8,
        n_predict=6,
        requested=RequestedSettings(n_ctx=256),
        sampler=SamplerSettings(temperature=0),
        on_text=on_text,
    )
    assert result.n_gen > 0 and result.settings.n_threads_batch == len(cpus)
    # before loading: the generation set (threads inherit it); then the prompt on every CPU, then generation
    assert pins == [[gen_cpu], cpus, [gen_cpu]]
    # every thread llama.cpp started for the prompt (OpenMP workers included) moved to the generation CPU
    assert while_generating and all(s == {(gen_cpu,)} for s in while_generating)
