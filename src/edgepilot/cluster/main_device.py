"""What the main device (llama-server with --rpc) holds when it keeps the first layers on its own CPU.

The same memory model as `fit` (plan/memory_model.py), given only the tensors that stay on the main device:
the input layer (token_embd: GET_ROWS on the CPU, always) and blocks 0..n_main-1 (llama.cpp keeps the layers
below n_layer+1-ngl on the CPU). Its KV cache is those layers' only. The whole file is still mapped with
MAP_POPULATE while loading (the tensors sent to the helpers are read from the mapping), so the load peak
counts the file whatever the split; after loading only the span of the tensors left in CPU_Mapped stays.
Each tensor sent to a helper is first copied whole into one message (ggml-rpc.cpp serialize_set_tensor):
while loading, the main device also holds the largest of them (a tied output's 170 MiB copy of Gemma 3's
token_embd when a helper holds the output layer: measured 482 MiB where the rest predicts 303).
With the output on the main device (a tied output kept here by -ot), its duplicate costs nothing unless
this CPU repacks token_embd's type for the matrix multiplication: then it is a CPU_REPACK copy, as in `fit`.
llama-server carries no Python interpreter: the runtime is the calibrated one minus INTERPRETER_BYTES.
"""

from __future__ import annotations

from dataclasses import replace

from edgepilot.cluster.split import DeviceShare, layer_of
from edgepilot.gguf.arch import ArchParams
from edgepilot.gguf.gguf_records import GGUFHeader, TensorInfo
from edgepilot.plan.arithmetic import EngineArithmetic
from edgepilot.plan.memory_model import INTERPRETER_BYTES, predict, runtime_bytes
from edgepilot.plan.planner import DeviceFacts
from edgepilot.plan.settings import UNQUANTIZED_KV, EngineSettings
from edgepilot.plan.weights import WeightsEstimate, estimate_weights

MAIN = "main"


def _without_tied_output(w: WeightsEstimate) -> WeightsEstimate:
    """The repacked duplicate of a tied token_embd belongs to the output layer: a helper holds it."""
    if not w.tied_output_bytes:
        return w
    largest = list(w.largest_repacked)
    largest.remove(w.tied_output_bytes)
    return replace(
        w,
        repack_bytes=w.repack_bytes - w.tied_output_bytes,
        repacked_tensors=w.repacked_tensors - 1,
        tied_output_bytes=0,
        largest_repacked=largest,
    )


class MainDevice:
    """Predicted peaks of the main device for each number of layers it keeps (cached: budget-free).
    layers: every layer's tensors as the helpers would get them (the output layer's included)."""

    def __init__(
        self,
        header: GGUFHeader,
        arch: ArchParams,
        device: DeviceFacts,
        n_ctx: int,
        kv: str,
        kv_per: dict,
        layers: dict[int, list[TensorInfo]],
        output_here: bool = False,
    ) -> None:
        self.header, self.arch, self.kv_per, self.output_here = header, arch, kv_per, output_here
        # the largest message while loading when layers n.. go to the helpers
        self._sent = [max((t.n_bytes or 0 for t in layers[il]), default=0) for il in sorted(layers)]
        self.repack_plan = device.cpu.repack_plan()
        self.settings = EngineSettings(
            n_ctx=n_ctx,
            type_k=kv,
            type_v=kv,
            flash_attn=kv not in UNQUANTIZED_KV,
            n_threads=device.default_threads(),
        )
        self.arithmetic = EngineArithmetic(
            "llama-server (main device)", runtime_bytes=runtime_bytes(arch) - INTERPRETER_BYTES
        )
        self._cache: dict[int, DeviceShare] = {}

    def share(self, n_main: int, budget: int | None = None) -> DeviceShare:
        if n_main not in self._cache:
            self._cache[n_main] = self._predict(n_main)
        return replace(self._cache[n_main], budget_bytes=budget)

    def _predict(self, n_main: int) -> DeviceShare:
        n_layer = self.arch.n_layer
        kept = []
        for t in self.header.tensors:
            il = layer_of(t.name, n_layer)
            if il is None or il < n_main:
                kept.append(t)
        weights = estimate_weights(
            kept, self.repack_plan, self.header.architecture, file_size=self.header.file_size
        )
        if not self.output_here:
            weights = _without_tied_output(weights)
        pred = predict(
            self.header,
            self.arch,
            self.settings,
            self.repack_plan,
            weights=weights,
            arithmetic=self.arithmetic,
        )
        m = pred.memory
        kv_main = sum(self.kv_per[il] for il in range(n_main))
        running = (
            m.runtime_bytes
            + weights.resident_bytes(True, True)
            + m.repack_bytes
            + kv_main
            + m.compute_touched_bytes
            + m.compute_work_bytes
            + m.output_bytes
        )
        load = m.runtime_bytes + weights.load_peak_bytes(True, True) + max(self._sent[n_main:], default=0)
        return DeviceShare(
            name=MAIN,
            first_layer=0,
            end_layer=n_main,
            weights_bytes=weights.resident_bytes(True, True) + m.repack_bytes,
            kv_bytes=kv_main,
            load_peak_bytes=load,
            predicted_peak_bytes=max(running, load),
        )
