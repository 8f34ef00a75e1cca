"""The outputs README.md and docs/*.md show still come from the current code: scripts/readme_check.py runs
them (CI runs it through this test) and compares their shape."""

from __future__ import annotations

import importlib.util
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "readme_check.py"


@pytest.fixture(scope="module")
def rc():
    spec = importlib.util.spec_from_file_location("readme_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_check"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("fits: predicted peak 441.5 MiB of a 299.8 MiB budget", "fits: predicted peak N"),
        ("to fit: without --flash-attn the same context", "to fit: without --flash-attn the"),
        ("memory   15.36 GiB total · 13.56 GiB available", "memory N GiB"),
        ("quantization     Q4_1 · 5.74 bits per weight", "quantization QN_N ·"),
        ("storage /home/orangepi: ext4 on / (ok)", "storage PATH: extN on PATH"),
        ("│ 4,5,6,7 │ Cortex-A76 │    2400 │ performance │", "│ 4 cols: N"),
        ("┃ cpus    ┃ core       ┃ max MHz ┃ kind        ┃", "┃ 4 cols: cpus | core | max MHz | kind"),
        ("┏━━━━━━━━━┳━━━━━━━━━━━━┓", "border"),
        ("   evidence: #00 0x0000000000000000 <unknown>", "evidence: #N NxN <unknown>"),
        ("", ""),
    ],
)
def test_line_kind_masks_numbers_and_paths(rc, line, kind):
    assert rc.line_kind(line) == kind


def test_machine_figures_do_not_change_the_kind_but_labels_do(rc):
    a = "fits: predicted peak 282.8 MiB of a 299.8 MiB budget (MemAvailable, 768.0 MiB kept free)"
    b = "fits: predicted peak 5147.3 MiB of a 7168.0 MiB budget (--budget, 0.0 MiB kept free)"
    assert rc.line_kind(a) == rc.line_kind(b)
    assert rc.line_kind(a) != rc.line_kind("does not fit: predicted peak 282.8 MiB")
    assert rc.line_kind("prompt 14 tok @ 53.1 t/s") != rc.line_kind("first token 173 ms · prompt 41 tok")


def test_an_elision_stands_for_any_number_of_lines(rc):
    produced = ["fits: peak 1 MiB", "a 1", "b 2", "settings: ctx 4096", "c"]
    assert rc.align(["fits: peak 9 MiB", "(...)", "settings: ctx 512", "(...)"], produced) == [
        0,
        None,
        3,
        None,
    ]
    assert rc.align(["fits: peak 9 MiB", "settings: ctx 512"], produced) is None


def test_write_keeps_the_readmes_elisions(rc):
    shown = ["fits: peak 9 MiB", "(...)", "fix: run on the CPU; ..."]
    produced = ["fits: peak 1 MiB", "a", "b", "fix: run on the CPU; and more words"]
    pairs = rc.align(shown, produced)
    assert rc.rewrite(shown, produced, pairs) == ["fits: peak 1 MiB", "(...)", "fix: run on the CPU; ..."]


# `build --print-only --target aarch64` at 120 columns: wrapped as a 5-character HOME wraps it (README.md),
# then its cmake line as a 70-character HOME wraps it and its run line as a 1-character cache path prints it
TOOLS = "~/.cache/edgepilot/tools/aarch64-0.3.36"
CMAKE_SHORT_HOME = [
    f"cmake --build {TOOLS}/build --config Release -j 2 --target llama-bench \\",
    "    ggml-rpc-server",
    "Run a tool with:",
    f"  QEMU_LD_PREFIX=/usr/aarch64-linux-gnu QEMU_CPU=max LD_LIBRARY_PATH={TOOLS}/bin \\",
    "      qemu-aarch64-static TOOL",
]
CMAKE_LONG_HOME = [
    "cmake --build \\",
    f"    {TOOLS}/build \\",
    "    --config Release -j 2 --target llama-bench ggml-rpc-server",
    "Run a tool with: QEMU_LD_PREFIX=/usr/aarch64-linux-gnu QEMU_CPU=max LD_LIBRARY_PATH=~/b"
    " qemu-aarch64-static TOOL",
]


def test_where_a_path_wraps_a_command_does_not_change_its_shape(rc):
    assert [len(g) for g in rc.logical_lines(CMAKE_SHORT_HOME)] == [2, 3]
    assert rc.align(CMAKE_SHORT_HOME, CMAKE_LONG_HOME) == [0, 1]
    assert rc.rewrite(["(...)", *CMAKE_SHORT_HOME], CMAKE_LONG_HOME, [None, 0, 1]) == [
        "(...)",
        *CMAKE_LONG_HOME,
    ]
    other = [CMAKE_LONG_HOME[0], CMAKE_LONG_HOME[1], "    --target llama-bench", CMAKE_LONG_HOME[3]]
    assert rc.align(CMAKE_SHORT_HOME, other) == [0, 1]  # only a line's first words are its kind
    changed = [CMAKE_SHORT_HOME[0].replace("--build", "--make"), *CMAKE_SHORT_HOME[1:]]
    assert rc.align(changed, CMAKE_LONG_HOME) is None


def test_a_label_alone_on_its_line_heads_only_the_command_under_it(rc):
    lines = ["llama.cpp:", "  llama-cli -m m.gguf -c 4096", "alternatives", "note:", "x"]
    assert rc.logical_lines(lines) == [lines[:2], [lines[2]], [lines[3]], [lines[4]]]
    one_line = ["llama.cpp: llama-cli -m m.gguf -c 512", "alternatives", "note:", "x"]
    assert rc.align(one_line, lines) == [0, 1, 2, 3]


RUN = "edgepilot run m.gguf -p hi -n 40 --temp 0"
RUN_SHOWN = [
    "preloaded 93.8 MiB into the page cache",
    "One tip that can help you save battery on your phone is to avoid using your phone during peak hours.",
    "first token 80 ms · prompt 20 tok @ 251.9 t/s · generation 40 tok @ 126.0 t/s · peak memory 188.6 MiB",
    "ctx 1024 · threads 2 · kv f16/f16",
]


def test_the_words_a_model_streams_are_not_compared(rc):
    # other words on another machine (its CPU kernels), on more lines; its figures pack the summary otherwise
    produced = [
        "preloaded 93.8 MiB into the page cache",
        "Turn off the screen when you do not need it.",
        "",
        "1. Lower the brightness",
        "first token 1180 ms · prompt 20 tok @ 25.9 t/s · generation 40 tok @ 9.0 t/s",
        "peak memory 188.6 MiB · ctx 1024 · threads 2 · kv f16/f16",
    ]
    assert rc.align(RUN_SHOWN, produced, RUN) == [0, 1, 2]
    assert rc.rewrite(RUN_SHOWN, produced, [0, 1, 2], RUN) == produced
    assert rc.align(RUN_SHOWN, produced[:1] + produced[4:], RUN) == [0, 1, 2]  # no words at all
    # what is ours still counts: the summary's labels, and a summary at all
    assert rc.align(RUN_SHOWN, [*produced[:5], "peak memory 188.6 MiB · ctx 1024 · kv f16/f16"], RUN) is None
    assert rc.align(RUN_SHOWN, ["edgepilot: error: no llama.cpp to run"], RUN) is None
    assert rc.align(RUN_SHOWN, produced, RUN.replace(" run ", " fit ")) is None  # only `run` streams words


def _check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(env or os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def test_the_readme_outputs_have_the_shape_of_the_current_code():
    proc = _check()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = proc.stdout.strip().splitlines()[-1]
    assert "0 differ" in summary and "commands checked" in summary and "skipped" in summary


@pytest.fixture
def long_home(tmp_path, gemma_path) -> dict[str, str]:
    """The environment of this machine with a HOME of 70+ characters: its cache (the built llama.cpp, the
    bundled model) under that HOME, as on a machine where the user's name is long."""
    from edgepilot.gguf.resolve import cache_dir

    home = tmp_path / ("a-home-with-a-long-name-" + "x" * 40)
    (home / ".cache").mkdir(parents=True)
    (home / ".cache" / "edgepilot").symlink_to(cache_dir(), target_is_directory=True)
    env = dict(os.environ, HOME=str(home), PYTHONUSERBASE=site.getuserbase())  # --user installs stay found
    for name in ("XDG_CACHE_HOME", "EDGEPILOT_TOOLS_DIR"):  # the cache must follow HOME
        env.pop(name, None)
    return env


def test_the_readme_check_does_not_depend_on_the_length_of_home(long_home):
    proc = _check(env=long_home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 differ" in proc.stdout.strip().splitlines()[-1]


def _section(command: str) -> list[str]:
    """The console block of one command, as a page of its own: the first in README.md, else in docs/*.md."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = page.read_text(encoding="utf-8").splitlines()
        if f"$ {command}" in lines:
            start = lines.index(f"$ {command}")
            return ["```console", *lines[start : lines.index("```", start)], "```"]
    raise AssertionError(f"no page shows `$ {command}`")


def _readme(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_with_a_long_home_a_changed_word_in_a_wrapped_command_is_still_reported(long_home, tmp_path):
    section = _section("edgepilot build --print-only --target aarch64 --tools llama-bench,rpc-server")
    same = _readme(tmp_path / "same.md", section)
    wrapped = next(n for n, x in enumerate(section) if x.startswith("cmake --build ") and x.endswith(" \\"))
    section[wrapped] = section[wrapped].replace("cmake --build ", "cmake --make ")
    changed = _readme(tmp_path / "changed.md", section)

    assert _check("--readme", same, env=long_home).returncode == 0
    proc = _check("--readme", changed, env=long_home)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the output no longer has the shown shape" in proc.stdout
    assert "-cmake --make PATH" in proc.stdout and "+cmake --build PATH" in proc.stdout
    assert "1 commands checked, 1 differ" in proc.stdout


def test_a_run_shown_with_another_machines_words_still_matches_but_not_another_summary(tmp_path):
    section = _section(
        'edgepilot run SmolLM2-135M-Instruct.Q4_1.gguf -p "Give me one tip for saving battery on a phone." '
        "-n 40 --temp 0 --ctx 1024"
    )
    assert section[2].startswith("preloaded ") and section[4].startswith("first token ")
    section[3:4] = ["Charge it at night.", "", "Sure! Here are some tips:"]  # what another CPU's kernels say
    other_words = _readme(tmp_path / "words.md", section)
    section[-2] = section[-2].replace("kv ", "cache ")
    other_summary = _readme(tmp_path / "summary.md", section)

    assert _check("--readme", other_words).returncode == 0
    proc = _check("--readme", other_summary)
    assert proc.returncode == 1 and "1 differ" in proc.stdout, proc.stdout + proc.stderr
