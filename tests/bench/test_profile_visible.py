"""A tuned profile never changes a run behind the user's back: run says it applied, --no-profile leaves it
out, `tune --show` and `tune --forget` manage it (the CLI, as a user runs it)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from edgepilot.tuned.profiles import save_profile
from profilekit import make_profile

RUN = ["-p", "Hi", "-n", "2", "--ctx", "256", "--temp", "0"]


def _invoke(cli_app, *args):
    return CliRunner().invoke(cli_app, list(args), catch_exceptions=False)


def test_run_says_the_profile_applied_and_no_profile_leaves_it_out(cli_app, gemma_path):
    save_profile(make_profile(gemma_path, n_ubatch=128, flash_attn=True))
    res = _invoke(cli_app, "run", str(gemma_path), *RUN)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())  # the line wraps at the terminal's width
    line = text[text.index("tuned profile of 2026-11-29") :]
    assert "ubatch 128" in line and "flash attention on" in line and "--no-profile" in line

    tuned = json.loads(_invoke(cli_app, "run", str(gemma_path), *RUN, "--json").output)
    plain = json.loads(_invoke(cli_app, "run", str(gemma_path), *RUN, "--json", "--no-profile").output)
    assert tuned["plan"]["profile"].startswith("tuned profile of") and plain["plan"]["profile"] is None
    assert (tuned["settings"]["n_ubatch"], tuned["settings"]["flash_attn"]) == (128, True)
    assert plain["settings"]["n_ubatch"] != 128 and plain["settings"]["flash_attn"] is False
    out = _invoke(cli_app, "run", str(gemma_path), *RUN, "--no-profile").output
    assert "tuned profile" not in out


def test_a_setting_the_user_gave_is_never_the_profiles(cli_app, gemma_path):
    save_profile(make_profile(gemma_path, n_ubatch=128, flash_attn=True))
    data = json.loads(
        _invoke(cli_app, "fit", str(gemma_path), "--no-flash-attn", "-ub", "64", "--json").output
    )
    assert (data["settings"]["flash_attn"], data["settings"]["n_ubatch"]) == (False, 64)
    assert "flash attention" not in (data["profile"] or "") and "ubatch" not in (data["profile"] or "")
    assert "1 thread on CPUs" in data["profile"]  # the profile's one thread (before: "1 thread(s)")


def test_tune_show_and_forget(cli_app, gemma_path, data_dir):
    none = _invoke(cli_app, "tune", str(gemma_path), "--show")
    assert none.exit_code == 0 and "no tuned profile for" in none.output
    saved = save_profile(make_profile(gemma_path, n_threads=1, n_ubatch=128))
    shown = json.loads(_invoke(cli_app, "tune", str(gemma_path), "--show", "--json").output)
    assert shown["path"] == str(saved) and shown["profile"]["n_ubatch"] == 128 and not shown["forgotten"]
    text = _invoke(cli_app, "tune", str(gemma_path), "--show").output
    assert "tuned profile of 2026-11-29" in text and "ubatch: 128" in text
    lines = [ln for ln in text.splitlines() if not ln.startswith("file:") and ln.strip() != str(saved)]
    assert max(len(ln) for ln in lines) <= 50
    gone = _invoke(cli_app, "tune", str(gemma_path), "--forget")
    assert gone.exit_code == 0 and "forgot the tuned profile of 2026-11-29" in gone.output
    assert not Path(saved).exists()
    again = json.loads(_invoke(cli_app, "tune", str(gemma_path), "--forget", "--json").output)
    assert again["forgotten"] is False and again["profile"] is None
    both = _invoke(cli_app, "tune", str(gemma_path), "--show", "--forget")
    assert both.exit_code == 2


def test_serve_prefers_the_profile_tuned_for_sustained_speed_run_the_burst_one(cli_app, gemma_path, data_dir):
    """A server runs for hours: serve plans with what `tune --sustained` kept; run with the burst tune's."""
    from edgepilot.plan.requested import RequestedSettings
    from edgepilot.serve.planning import plan_serve
    from edgepilot.tuned.decide import decide

    held = make_profile(gemma_path, n_threads=1, chosen_by="sustained", sustained_tps=40.0)
    sustained = save_profile(held)
    assert sustained.name.endswith(".sustained.json")
    # the only profile: run uses it too, and says how it was chosen
    assert decide(gemma_path).settings.n_threads == 1
    assert "(chosen by sustained speed)" in decide(gemma_path).plan.profile
    burst = save_profile(make_profile(gemma_path, n_threads=2))
    assert burst != sustained and sustained.exists()
    assert decide(gemma_path).settings.n_threads == 2  # run, chat, fit: the burst tune
    served = plan_serve(gemma_path, RequestedSettings())
    assert served.settings.n_threads == 1 and "chosen by sustained speed" in served.fit.profile
    assert plan_serve(gemma_path, RequestedSettings(n_threads=2)).settings.n_threads == 2  # the user's -t

    text = _invoke(cli_app, "tune", str(gemma_path), "--show").output
    assert "serve uses the one tuned --sustained" in " ".join(text.split()) and sustained.name in text
    gone = json.loads(_invoke(cli_app, "tune", str(gemma_path), "--forget", "--json").output)
    assert gone["forgotten"] and gone["sustained_path"] == str(sustained)
    assert not burst.exists() and not sustained.exists()
    assert plan_serve(gemma_path, RequestedSettings()).fit.profile is None
