"""`edgepilot cluster plan`: split a model's layers over RPC helpers by what each one's budget holds."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.cluster.split import DeviceShare, helper_share, kv_per_layer, llama_split, tensors_by_layer
from edgepilot.defaults import DEFAULT_CTX
from edgepilot.errors import UserError
from edgepilot.plan.budget import compute_budget, parse_size
from edgepilot.plan.fit import load_model_facts, read_device

DEFAULT_PORT = 50052


@dataclass(frozen=True)
class Helper:
    host: str
    port: int
    budget_bytes: int

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"


def parse_helper(text: str) -> Helper:
    """HOST:PORT=BUDGET (e.g. 192.168.1.20:50052=3GiB) or HOST:PORT=ROOT: a probe root or snapshot tree of
    that device, whose budget is what `edgepilot fit --root ROOT` would plan under."""
    where, sep, size = text.partition("=")
    host, colon, port = where.rpartition(":")
    if not sep or not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(
            f"--helper {text!r}: write HOST:PORT=BUDGET or HOST:PORT=ROOT, e.g. 127.0.0.1:50052=512MiB"
        )
    if Path(size).is_dir():
        device = read_device(size)
        return Helper(host, int(port), compute_budget(device.memory, device.android, None).budget_bytes)
    return Helper(host, int(port), parse_size(size))


@dataclass
class ClusterPlan:
    model: str
    n_layer: int
    n_ctx: int
    fits: bool
    tensor_split: list[float]
    helpers: list[DeviceShare]
    helper_commands: list[list[str]]
    main_command: list[str]  # llama.cpp's llama-server
    edgepilot_command: list[str]  # the same through edgepilot serve (front, watchdog, doctor)
    notes: list[str] = field(default_factory=list)

    @property
    def rpc(self) -> str:
        return ",".join(h.name for h in self.helpers)


def _fill(budgets: list[int], fraction: float, shares_for) -> list[int] | None:
    """Layer counts, last helper first (it holds the output layer): each takes what fits in fraction of its
    budget; None when layers are left over."""
    n_total = shares_for.n_total
    counts = [0] * len(budgets)
    end = n_total
    for j in range(len(budgets) - 1, -1, -1):
        first = end
        while first > 0 and shares_for(j, first - 1, end).predicted_peak_bytes <= fraction * budgets[j]:
            first -= 1
        if j == len(budgets) - 1 and first == end:
            return None  # the output layer must go to the last helper
        counts[j] = end - first
        end = first
    return counts if end == 0 else None


def plan_cluster(model: str, helpers: list[Helper], n_ctx: int = DEFAULT_CTX, kv: str = "f16") -> ClusterPlan:
    if not helpers:
        raise UserError("give at least one helper: --helper HOST:PORT=BUDGET")
    path, header, arch = load_model_facts(model)
    n_layer = arch.n_layer
    layers = tensors_by_layer(header, n_layer)
    kv_bytes = kv_per_layer(arch, n_ctx, kv, kv)
    budgets = [h.budget_bytes for h in helpers]

    def shares_for(j: int, first: int, end: int) -> DeviceShare:
        return helper_share(helpers[j].endpoint, first, end, layers, kv_bytes, budgets[j])

    shares_for.n_total = n_layer + 1  # type: ignore[attr-defined]
    counts = _fill(budgets, 1.0, shares_for)
    fits = counts is not None
    if counts is not None:
        lo, hi = 0.0, 1.0  # the smallest share of every budget that still holds the model: balanced headroom
        for _ in range(20):
            mid = (lo + hi) / 2
            found = _fill(budgets, mid, shares_for)
            if found is None:
                lo = mid
            else:
                hi, counts = mid, found
    else:
        total = sum(budgets)
        counts = [max(1, round((n_layer + 1) * b / total)) for b in budgets]
        counts[-1] = n_layer + 1 - sum(counts[:-1])
        if counts[-1] < 1:
            counts = [1] * len(budgets)
            counts[0] = n_layer + 1 - (len(budgets) - 1)
    shares, first = [], 0
    for j, c in enumerate(counts):
        shares.append(shares_for(j, first, first + c))
        first += c
    split = llama_split(counts)
    ts = ",".join(f"{s:g}" for s in split)
    rpc = ",".join(h.endpoint for h in helpers)
    helper_cmds = [
        ["edgepilot", "rpc-server", "--port", str(h.port)]
        + (["--host", h.host] if h.host != "127.0.0.1" else [])
        for h in helpers
    ]
    main = ["llama-server", "-m", str(path), "-c", str(n_ctx), "-ctk", kv, "-ctv", kv, "-np", "1"]
    main += ["-ngl", str(n_layer + 1), "--rpc", rpc, "--tensor-split", ts]
    ours = ["edgepilot", "serve", str(path), "--ctx", str(n_ctx), "--rpc", rpc, "--tensor-split", ts]
    if kv != "f16":
        ours += ["--kv", kv]
    notes = [
        "the main device keeps the input layer (token embeddings, memory-mapped) and runs the sampling",
        "rpc-server has no authentication: keep helpers on 127.0.0.1 and reach them over SSH tunnels",
    ]
    if not fits:
        notes.insert(0, "does not fit: the helpers' budgets together cannot hold the model at this context")
    return ClusterPlan(str(path), n_layer, n_ctx, fits, split, shares, helper_cmds, main, ours, notes)


def as_lines(plan: ClusterPlan) -> list[str]:
    cmds = [*plan.helper_commands, plan.main_command, plan.edgepilot_command]
    return [shlex.join(c) for c in cmds]
