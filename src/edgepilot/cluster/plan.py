"""`edgepilot cluster plan`: split a model's layers over RPC helpers by what each one's budget holds."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from edgepilot.cluster.link_plan import LinkVerdict
from edgepilot.cluster.split import DeviceShare, helper_share, kv_per_layer, llama_split, tensors_by_layer
from edgepilot.defaults import DEFAULT_CTX
from edgepilot.device.probe import is_archive
from edgepilot.errors import UserError
from edgepilot.plan.budget import compute_budget
from edgepilot.plan.fit import load_model_facts, read_device
from edgepilot.sizes import MIB, parse_size, show_size

DEFAULT_PORT = 50052
MIN_BUDGET = MIB  # what the budget flags take at least: 0.1, 0.5B or 1e-30GiB is a slip, not a budget
# a DNS name or IPv4 address, or an IPv6 address in brackets: never a ',' (llama.cpp's --rpc separator)
_HOST = re.compile(r"[A-Za-z0-9._-]{1,253}|\[[0-9A-Fa-f:.%A-Za-z]{2,60}\]")


@dataclass(frozen=True)
class Helper:
    host: str
    port: int
    budget_bytes: int

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"


def parse_helper(text: str) -> Helper:
    """HOST:PORT=BUDGET (e.g. 192.168.1.20:50052=3GiB) or HOST:PORT=ROOT: a probe root (device tree or
    snapshot archive) of that device, whose budget is what `edgepilot fit --root ROOT` would plan under."""
    where, sep, size = text.partition("=")
    host, colon, port = where.rpartition(":")
    if not sep or not colon or not port.isdigit() or len(port) > 5 or not 0 < int(port) < 65536:
        raise UserError(
            f"--helper {text!r}: write HOST:PORT=BUDGET or HOST:PORT=ROOT, e.g. 127.0.0.1:50052=512MiB"
        )
    if not _HOST.fullmatch(host):
        # llama.cpp's --rpc is a comma-separated list: "a,b" would silently become two helpers
        raise UserError(
            f"--helper {text!r}: {host!r} is not a host name or address (letters, digits, '.', '-', '_'; "
            "an IPv6 address in brackets)"
        )
    if "/" in size or is_archive(Path(size)) or Path(size).is_dir():
        return Helper(host, int(port), _root_budget(text, size))
    return Helper(host, int(port), parse_size(size, what=f"--helper {where} budget", minimum=MIN_BUDGET))


def _root_budget(text: str, root: str) -> int:
    try:
        device = read_device(root)
    except UserError as exc:
        raise UserError(f"--helper {text!r}: {exc}") from None
    if device.memory.available_bytes is None:
        raise UserError(
            f"--helper {text!r}: no usable memory figure in that device's /proc/meminfo; "
            "give its budget instead, e.g. HOST:PORT=512MiB"
        )
    budget = compute_budget(device.memory, device.android, None).budget_bytes
    if budget < MIN_BUDGET:
        raise UserError(
            f"--helper {text!r}: that device has {show_size(budget)} to lend, under {show_size(MIN_BUDGET)}"
        )
    return budget


def check_helpers(helpers: list[Helper], n_layer: int) -> None:
    """Each helper once, and no more helpers than layers to give them (the output layer counts)."""
    seen: set[str] = set()
    for h in helpers:
        key = h.endpoint.lower()
        if key in seen:
            raise UserError(f"--helper {h.endpoint} is given twice: each rpc-server can hold one share")
        seen.add(key)
    if len(helpers) > n_layer + 1:
        raise UserError(
            f"{len(helpers)} helpers for {n_layer + 1} layers (output included): give at most {n_layer + 1}"
        )


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
    link: LinkVerdict | None = None  # with --link: predicted speed, beside the main device alone

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
    check_helpers(helpers, n_layer)
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
    idle = [s.name for s in shares if s.n_layers == 0]
    if idle:  # named: each is still in --rpc, where llama.cpp connects to it
        notes.insert(
            0, f"no layers for {', '.join(idle)}: the others hold the model; leave them out of --rpc"
        )
    if not fits:
        notes.insert(0, "does not fit: the helpers' budgets together cannot hold the model at this context")
    return ClusterPlan(str(path), n_layer, n_ctx, fits, split, shares, helper_cmds, main, ours, notes)


def as_lines(plan: ClusterPlan) -> list[str]:
    cmds = [*plan.helper_commands, plan.main_command, plan.edgepilot_command]
    return [shlex.join(c) for c in cmds]
