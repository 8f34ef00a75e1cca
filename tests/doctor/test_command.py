"""Reading the supervised command line: model, settings, and the same command with another context."""

from __future__ import annotations

from edgepilot.doctor.command import parse_command, with_context
from edgepilot.doctor.logscan import scan
from edgepilot.plan.requested import RequestedSettings


def test_edgepilot_run_command():
    c = parse_command(
        [
            "/venv/bin/edgepilot",
            "run",
            "m.gguf",
            "--ctx",
            "32768",
            "--prompt-file",
            "p.txt",
            "-n",
            "4",
            "--raw",
            "--kv",
            "q8_0",
            "--flash-attn",
            "--threads",
            "2",
        ]
    )
    assert c.tool == "edgepilot" and c.model == "m.gguf" and not c.model_is_default
    assert c.settings == RequestedSettings(
        n_ctx=32768, type_k="q8_0", type_v="q8_0", flash_attn=True, n_threads=2
    )


def test_edgepilot_run_without_model_means_the_bundled_one():
    c = parse_command(["edgepilot", "run", "-p", "a prompt with words", "--ctx=512"])
    assert c.model is None and c.model_is_default and c.settings == RequestedSettings(n_ctx=512)


def test_max_temp_takes_a_value_not_the_models_place():
    c = parse_command(["edgepilot", "run", "--max-temp", "80", "--watch-root", "tree", "-n", "4"])
    assert c.model is None and c.model_is_default
    c = parse_command(["edgepilot", "serve", "--max-temp", "80", "m.gguf"])
    assert c.model == "m.gguf"


def test_llama_cli_command():
    c = parse_command(
        [
            "./llama-cli",
            "-m",
            "a.gguf",
            "-c",
            "8192",
            "-fa",
            "on",
            "-ngl",
            "99",
            "--verbose-prompt",
            "-t",
            "4",
            "-ctk",
            "q8_0",
            "--no-mmap",
        ]
    )
    assert c.tool == "llama.cpp" and c.model == "a.gguf" and c.n_gpu_layers == 99
    assert c.settings == RequestedSettings(
        n_ctx=8192, flash_attn=True, n_threads=4, type_k="q8_0", use_mmap=False
    )


def test_load_mode_none_is_no_mmap():
    assert parse_command(["llama-cli", "-m", "m.gguf", "-lm", "none"]).settings.use_mmap is False
    assert parse_command(["llama-cli", "-m", "m.gguf", "--load-mode", "mmap"]).settings.use_mmap is True


def test_no_repack_is_read_from_edgepilot_and_llama_cpp_commands():
    assert parse_command(["edgepilot", "run", "m.gguf", "--no-repack"]).settings == RequestedSettings(
        repack=False
    )
    assert parse_command(["llama-cli", "-m", "m.gguf", "--no-repack"]).settings.repack is False


def test_any_command_naming_a_gguf():
    c = parse_command(["python3", "serve.py", "--port", "80", "models/x.gguf"])
    assert c.tool == "other" and c.model == "models/x.gguf"


def test_with_context_replaces_or_adds_the_flag():
    assert with_context(["edgepilot", "run", "m", "--ctx", "32768"], 2816) == [
        "edgepilot",
        "run",
        "m",
        "--ctx",
        "2816",
    ]
    assert with_context(["llama-cli", "-m", "a"], 512) == ["llama-cli", "-m", "a", "-c", "512"]
    assert with_context(["llama-server", "--ctx-size=9"], 5) == ["llama-server", "--ctx-size=5"]
    assert with_context(["edgepilot", "run", "m"], 1024)[-2:] == ["--ctx", "1024"]


def test_log_facts_from_llama_cpp_output():
    f = scan(
        [
            "build: 36 (3e4bb29) with Clang 21.1.8 for Android armv7l",
            "llama_model_loader: loaded meta data with 26 key-value pairs and 291 tensors from /mnt/x/q.gguf "
            "(version GGUF V3)",
            "print_info: n_ctx_train      = 131072",
            "llama_context: n_ctx         = 4096",
            "llama_kv_cache: size =  180.00 MiB (  8192 cells,  30 layers,  1/1 seqs), K (f16):   90.00 MiB",
            "system_info: n_threads = 8 (n_threads_batch = 8) / 8 | CPU : NEON = 1 |",
            "llama_perf_context_print:        load time =   26232.51 ms",
            "llama_perf_context_print: prompt eval time =  186348.29 ms /    51 tokens "
            "( 3653.89 ms per token,     0.27 tokens per second)",
            "llama_perf_context_print:        eval time =    6138.24 ms /    33 runs   "
            "(  186.01 ms per token,     5.38 tokens per second)",
        ]
    )
    assert f.build_target == "Android armv7l"
    assert f.model_paths == ["/mnt/x/q.gguf"]
    assert (f.n_ctx, f.n_ctx_train, f.kv_mib, f.kv_cells) == (4096, 131072, 180.0, 8192)
    assert (f.n_threads, f.n_threads_available) == (8, 8)
    assert (f.load_ms, f.prompt_tps, f.eval_tps) == (26232.51, 0.27, 5.38)
