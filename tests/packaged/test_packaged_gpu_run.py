"""The GPU lane: Debian's ggml Vulkan backend with Mesa's lavapipe made visible (GGML_VK_VISIBLE_DEVICES=0),
as a Termux user with `llama-cpp-backend-vulkan` installed has it. A CPU run must stay on the CPU (no Vulkan
buffer, no op offload); a run asked onto the device must offload and answer as the CPU does.

Lavapipe runs on this machine's CPU about 50x slower than llama.cpp's CPU backend: short prompts, few tokens.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import sidlane as lane

VISIBLE = {"GGML_VK_VISIBLE_DEVICES": "0"}
PROMPT = "Count: one, two, three,"


def edgepilot(root, *args, env=None, **kw):
    return lane.run(root, ["edgepilot", *args], env={**VISIBLE, **(env or {})}, **kw)


def run_json(root, *args):
    done = edgepilot(root, "run", *args, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def vulkan_lines(log: str) -> list[str]:
    pattern = r"ggml_vulkan: \d+ =|using device Vulkan|Vulkan\d+ \S* ?buffer"
    return [line for line in log.splitlines() if re.search(pattern, line)]


@pytest.fixture(scope="module")
def models(sid_root):
    return {"smollm": lane.model_in_root(sid_root, "smollm"), "gemma": lane.bundled_model(sid_root)}


def test_the_device_is_visible_to_debians_llama_cpp(sid_root):
    done = lane.run(sid_root, ["llama-server", "--list-devices"], env=VISIBLE)
    assert re.search(r"Vulkan0: llvmpipe", done.stdout), done.stdout


def test_a_cpu_run_stays_on_the_cpu_with_the_gpu_visible(sid_root, models):
    done = edgepilot(sid_root, "run", models["smollm"], "-p", PROMPT, "-n", "4", "--temp", "0", "-v")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "CPU KV buffer size" in done.stderr, done.stderr[-3000:]  # the log was read
    assert vulkan_lines(done.stderr) == []
    result = run_json(sid_root, models["smollm"], "-p", PROMPT, "-n", "4", "--temp", "0")
    assert result["settings"]["device"] == "none"
    args = result["llama_cpp_args"]
    assert args[args.index("-dev") + 1] == "none"


def test_the_same_command_without_dev_none_would_offload(sid_root, models):
    """What edgepilot avoids: llama.cpp's own default with the device visible, even at -ngl 0."""
    done = lane.run(
        sid_root,
        [
            "llama-completion",
            "-m",
            models["smollm"],
            "-p",
            PROMPT,
            "-n",
            "2",
            "-ngl",
            "0",
            "-no-cnv",
            "-c",
            "256",
            "-lv",
            "4",
        ],
        env=VISIBLE,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    offloaded = vulkan_lines(done.stderr)
    assert any("Vulkan0 compute buffer" in line for line in offloaded), done.stderr[-3000:]


@pytest.mark.parametrize("which", ["smollm", "gemma"])
def test_every_layer_on_the_device_answers_as_the_cpu_does(sid_root, models, which):
    # --raw: a plain continuation the model is sure of. Through SmolLM2's chat template the second token is a
    # near-tie (":" or ","), which lavapipe's f16 sums and the CPU's break differently (Debian sid's mesa of
    # 2026-12: "One, two, three" on the device, "One: 1" on the CPU): that is numerics, not a wrong offload.
    common = ("--raw", "-p", PROMPT, "-n", "8", "--temp", "0", "--ctx", "512")
    cpu = run_json(sid_root, models[which], *common, "--device", "none")
    gpu = run_json(sid_root, models[which], *common, "--device", "Vulkan0", "--gpu-layers", "all")
    assert gpu["settings"]["device"] == "Vulkan0"
    assert gpu["settings"]["n_gpu_layers"] >= 19  # every layer and the output
    args = gpu["llama_cpp_args"]
    assert args[args.index("-dev") + 1] == "Vulkan0" and args[args.index("-ngl") + 1] == str(
        gpu["settings"]["n_gpu_layers"]
    )
    assert gpu["n_gen"] == cpu["n_gen"] == 8
    assert gpu["text"] == cpu["text"], (gpu["text"], cpu["text"])


def test_gpu_layers_without_a_device_is_one_line(sid_root, models):
    done = edgepilot(sid_root, "run", models["smollm"], "-p", "hi", "--gpu-layers", "5")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--device" in done.stderr, done.stderr


def test_bench_measures_the_device_at_the_layer_counts_asked(sid_root, models):
    done = edgepilot(
        sid_root,
        "bench",
        models["smollm"],
        "-p", "8", "-n", "2", "-r", "1", "--no-warmup",
        "--device", "Vulkan0", "--gpu-layers", "0,all",
        "--json", "--no-save",
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)["rows"]
    assert {r["device"] for r in rows} == {"Vulkan0"}
    assert sorted({r["n_gpu_layers"] for r in rows}) == [0, 31]  # SmolLM2: 30 layers + the output
    assert all(r["avg_ts"] > 0 for r in rows)


def test_tune_tries_the_gpu_and_keeps_the_cpu(sid_root, models):
    done = edgepilot(
        sid_root,
        "tune",
        models["smollm"],
        "-p", "16", "-n", "4", "-r", "1",
        "--device", "Vulkan0", "--no-save", "--json",
        timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    points = report["gpu"]["points"]
    assert points[0]["device"] == "none" and points[0]["pp_ts"] > 0 and points[0]["tg_ts"] > 0
    gpu = [p for p in points if p["device"] == "Vulkan0"]
    assert gpu and gpu[0]["n_gpu_layers"] == 31 and gpu[0]["tg_ts"] > 0
    assert report["gpu"]["chosen"]["device"] == "none"
    assert report["profile"]["offload_device"] == "none"
    assert any("the CPU stays" in n for n in report["notes"]), report["notes"]


def test_chat_and_serve_offload_when_asked(sid_root, models, tmp_path):
    import openai

    done = edgepilot(
        sid_root,
        "chat", models["smollm"], "--temp", "0", "-n", "4", "--ctx", "512", "--json",
        "--device", "Vulkan0", "--gpu-layers", "all",
        input="Name a fruit.\n",
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    chat = json.loads(done.stdout)
    assert chat["turns"][0]["text"].strip()
    argv = ["edgepilot", "serve", models["smollm"], "--port", "0", "--json", "--ctx", "512"]
    argv += ["--device", "Vulkan0", "--gpu-layers", "all"]
    with lane.served(sid_root, argv, tmp_path / "serve.log", env=VISIBLE) as started:
        assert started["settings"]["device"] == "Vulkan0" and started["settings"]["n_gpu_layers"] == 31
        worker = Path(f"/proc/{started['worker_pid']}/cmdline").read_bytes().split(b"\0")
        assert worker[worker.index(b"-dev") + 1] == b"Vulkan0", worker  # llama-server, offloading
        client = openai.OpenAI(base_url=started["base_url"], api_key="none", max_retries=0, timeout=300)
        reply = client.chat.completions.create(
            model=started["model_name"],
            messages=[{"role": "user", "content": "Say hi."}],
            max_tokens=4,
            temperature=0,
        )
        assert reply.usage.completion_tokens > 0


def test_the_doctor_reads_a_slower_gpu_from_the_bench_history(sid_root, models):
    data = {"EDGEPILOT_DATA_DIR": "/tmp/ep-gpu-history"}
    lane.run(sid_root, ["rm", "-rf", data["EDGEPILOT_DATA_DIR"]])
    short = ("-p", "16", "-n", "4", "-r", "1", "--no-warmup")
    for device in (("--device", "none"), ("--device", "Vulkan0", "--gpu-layers", "all")):
        done = edgepilot(sid_root, "bench", models["smollm"], *short, *device, env=data, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
    done = edgepilot(sid_root, "doctor", "--model", models["smollm"], "--json", env=data)
    assert done.returncode == 0, done.stderr[-3000:]
    causes = {c["id"]: c for c in json.loads(done.stdout)["causes"]}
    slower = causes["gpu-slower-than-cpu"]
    assert any("CPU" in e and "Vulkan0" in e for e in slower["evidence"]), slower["evidence"]
    assert "-dev none" in slower["fix"]
