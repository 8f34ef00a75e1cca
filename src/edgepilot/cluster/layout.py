"""Which device holds which layers: valid by construction, checked against every device's budget.

Layer order is llama.cpp's: the main device keeps layers [0, n_main) on its CPU (-ngl n_layer+1-n_main),
then the helpers in --rpc order hold consecutive ranges, and the last helper that holds anything holds the
output layer (this llama.cpp offloads the output layer first whenever -ngl >= 1; a tied output's
projection stays on the main device, split.py's docstring says how). A helper left with no
layers is left out of --rpc altogether, so every device named holds at least one layer and every
--tensor-split share is positive.

Filling from the output backwards, each helper taking as many layers as fit in a share of its budget, is
optimal for "does it fit" (every device's peak only grows with more layers); the smallest share that still
fits spreads the headroom evenly (the main device's share counted above what it holds with no layers).
"""

from __future__ import annotations

from dataclasses import dataclass

from edgepilot.cluster.main_device import MainDevice
from edgepilot.cluster.split import DeviceShare, helper_share, kv_per_layer, tensors_by_layer, tied_output
from edgepilot.gguf.arch import ArchParams
from edgepilot.gguf.gguf_records import GGUFHeader
from edgepilot.plan.planner import DeviceFacts


class Costs:
    """Predicted peaks of one model at one context and KV type, per layer range (cached, budget-free)."""

    def __init__(
        self, header: GGUFHeader, arch: ArchParams, device: DeviceFacts, n_ctx: int, kv: str
    ) -> None:
        self.n_layer = arch.n_layer
        self.n_total = arch.n_layer + 1  # the output layer included
        # a tied output stays on the main device (-ot): it maps token_embd anyway, where a helper would
        # hold a copy (twice while it arrives) and send back a row of logits per token instead of a hidden
        # state; here it costs nothing, or a CPU_REPACK copy where this CPU repacks its type (main_device.py)
        self.output_on_main = tied_output(header)
        self.layers = tensors_by_layer(header, arch.n_layer, self.output_on_main)
        self.kv = kv_per_layer(arch, n_ctx, kv, kv)
        self.main = MainDevice(header, arch, device, n_ctx, kv, self.kv, self.layers, self.output_on_main)
        self._helper: dict[tuple[int, int], DeviceShare] = {}

    def helper(self, first: int, end: int) -> DeviceShare:
        key = (first, end)
        if key not in self._helper:
            self._helper[key] = helper_share("", first, end, self.layers, self.kv, None)
        return self._helper[key]

    def helper_peak(self, first: int, end: int) -> int:
        return self.helper(first, end).predicted_peak_bytes

    def main_peak(self, n_main: int) -> int:
        return self.main.share(n_main).predicted_peak_bytes


@dataclass(frozen=True)
class Arrangement:
    n_main: int  # layers the main device keeps (from layer 0)
    counts: list[int]  # layers per listed helper, in --rpc order (0: left out)
    fits: bool


def _fill(costs: Costs, budgets: list[int], main_budget: int, fraction: float) -> Arrangement | None:
    end = costs.n_total
    counts = [0] * len(budgets)
    for j in range(len(budgets) - 1, -1, -1):
        first = end
        while first > 0 and costs.helper_peak(first - 1, end) <= fraction * budgets[j]:
            first -= 1
        counts[j] = end - first
        end = first
    # the main device's share of its budget counts above what it holds anyway (the file mapped while
    # loading): otherwise that fixed part would force every helper to fill up too
    fixed = costs.main_peak(0)
    if end == costs.n_total or costs.main_peak(end) > fixed + fraction * (main_budget - fixed):
        return None  # no helper holds the output layer, or the main device cannot hold the rest
    return Arrangement(end, counts, True)


def arrange(costs: Costs, budgets: list[int], main_budget: int) -> Arrangement:
    best = _fill(costs, budgets, main_budget, 1.0)
    if best is None:
        return _overflow(costs, budgets)
    lo, hi = 0.0, 1.0
    for _ in range(16):
        mid = (lo + hi) / 2
        found = _fill(costs, budgets, main_budget, mid)
        if found is None:
            lo = mid
        else:
            hi, best = mid, found
    return best


def fits(costs: Costs, budgets: list[int], main_budget: int) -> bool:
    return _fill(costs, budgets, main_budget, 1.0) is not None


def _overflow(costs: Costs, budgets: list[int]) -> Arrangement:
    """Does not fit: still a valid layout (helpers filled to their budgets, the rest on the main device)."""
    end = costs.n_total
    counts = [0] * len(budgets)
    for j in range(len(budgets) - 1, -1, -1):
        first = end
        while first > 0 and costs.helper_peak(first - 1, end) <= budgets[j]:
            first -= 1
        counts[j] = end - first
        end = first
    if not any(counts):
        counts[-1], end = 1, costs.n_total - 1  # the output layer must go to a helper
    return Arrangement(end, counts, False)
