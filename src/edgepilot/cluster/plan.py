"""`edgepilot cluster plan`: split a model's layers over RPC helpers by what each one's budget holds."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

from edgepilot.cluster.layout import Costs, arrange
from edgepilot.cluster.link_plan import LinkVerdict
from edgepilot.cluster.split import OUTPUT_ON_MAIN, TOKEN_EMBD, DeviceShare, llama_split
from edgepilot.defaults import DEFAULT_CTX
from edgepilot.device.root_archive import is_archive
from edgepilot.errors import UserError
from edgepilot.gguf.arch import ArchParams
from edgepilot.gguf.gguf_records import GGUFHeader
from edgepilot.plan.budget import compute_budget
from edgepilot.plan.planner import DeviceFacts, load_model_facts, read_device
from edgepilot.plan.settings import UNQUANTIZED_KV
from edgepilot.sizes import MIB, parse_size, show_size
from edgepilot.words import count

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
    digits = port.isascii() and port.isdigit()  # "²".isdigit() is True, int("²") a ValueError
    if not sep or not colon or not digits or len(port) > 5 or not 0 < int(port) < 65536:
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
            f"{count(len(helpers), 'helper')} for {count(n_layer + 1, 'layer')} (output included): "
            f"give at most {n_layer + 1}"
        )


@dataclass
class ClusterPlan:
    model: str
    n_layer: int
    n_ctx: int
    fits: bool
    tensor_split: list[float]
    helpers: list[DeviceShare]  # the helpers that hold layers, in --rpc order
    helper_commands: list[list[str]]
    main_command: list[str]  # llama.cpp's llama-server
    edgepilot_command: list[str]  # the same through edgepilot serve (front, watchdog, doctor)
    main: DeviceShare | None = None  # the main device: the input layer and layers 0..n_gpu_start-1
    n_gpu_layers: int = 0  # llama.cpp's -ngl: the layers the helpers hold, output included
    left_out: list[str] = field(default_factory=list)  # helpers given no layers (not in --rpc)
    suggestions: list[str] = field(default_factory=list)  # when it does not fit: changes that would fit
    notes: list[str] = field(default_factory=list)
    link: LinkVerdict | None = None  # with --link: predicted speed, beside the main device alone
    output_on_main: bool = False  # a tied output computed on the main device (-ot token_embd\.weight=CPU)

    @property
    def rpc(self) -> str:
        return ",".join(h.name for h in self.helpers)


_COSTS: list[tuple[GGUFHeader, DeviceFacts, int, str, Costs]] = []


def _costs(header: GGUFHeader, arch: ArchParams, device: DeviceFacts, n_ctx: int, kv: str) -> Costs:
    """The same model, device, context and KV type planned again: its per-range peaks are already known."""
    for h, d, c, k, costs in _COSTS:
        if h is header and d is device and (c, k) == (n_ctx, kv):
            return costs
    costs = Costs(header, arch, device, n_ctx, kv)
    _COSTS[:] = [*_COSTS[-3:], (header, device, n_ctx, kv, costs)]
    return costs


def main_budget_of(root: str | Path) -> tuple[DeviceFacts, int]:
    """This device's facts and budget, as `fit` plans them."""
    device = read_device(root)
    if device.memory.available_bytes is None:
        raise UserError(
            "no usable memory figure for the main device: give its budget with --main-budget SIZE"
        )
    return device, compute_budget(device.memory, device.android, None).budget_bytes


def plan_cluster(
    model: str,
    helpers: list[Helper],
    n_ctx: int = DEFAULT_CTX,
    kv: str = "f16",
    main_budget: int | None = None,
    root: str | Path = "/",
    suggest: bool = True,
    facts: tuple[Path, GGUFHeader, ArchParams] | None = None,
    device: DeviceFacts | None = None,
) -> ClusterPlan:
    """main_budget: the main device's (None: the probe of `root`, as `fit` plans it). facts and device: the
    model and the main device already read, to plan many budgets without reading them again."""
    if not helpers:
        raise UserError("give at least one helper: --helper HOST:PORT=BUDGET")
    path, header, arch = facts or load_model_facts(model)
    n_layer = arch.n_layer
    check_helpers(helpers, n_layer)
    if main_budget is None:
        device, main_budget = main_budget_of(root)
    elif device is None:
        device = read_device(root)
    costs = _costs(header, arch, device, n_ctx, kv)
    budgets = [h.budget_bytes for h in helpers]
    layout = arrange(costs, budgets, main_budget)
    shares, first, kept = [], layout.n_main, []
    for h, c in zip(helpers, layout.counts, strict=True):
        if c:
            shares.append(
                replace(costs.helper(first, first + c), name=h.endpoint, budget_bytes=h.budget_bytes)
            )
            kept.append(h)
            first += c
    main = costs.main.share(layout.n_main, main_budget)
    n_gpu = n_layer + 1 - layout.n_main
    split = llama_split([s.n_layers for s in shares])
    ts = ",".join(f"{s:g}" for s in split)
    rpc = ",".join(h.endpoint for h in kept)
    helper_cmds = [
        ["edgepilot", "rpc-server", "--port", str(h.port)]
        + (["--host", h.host] if h.host != "127.0.0.1" else [])
        for h in kept
    ]
    main_cmd = ["llama-server", "-m", str(path), "-c", str(n_ctx), "-ctk", kv, "-ctv", kv, "-np", "1"]
    if kv not in UNQUANTIZED_KV:
        main_cmd += ["-fa", "on"]
    # -dev after --rpc names the helpers' devices (one each: `edgepilot rpc-server` lends its CPU only), so a
    # GPU backend installed on the main device takes no layer the plan gave to its CPU
    devices = ",".join(f"RPC{i}" for i in range(len(kept)))
    main_cmd += ["-ngl", str(n_gpu), "--rpc", rpc, "-dev", devices, "--tensor-split", ts]
    ours = ["edgepilot", "serve", str(path), "--ctx", str(n_ctx), "--rpc", rpc, "--tensor-split", ts]
    if n_gpu != n_layer + 1:
        ours += ["--gpu-layers", str(n_gpu)]
    if costs.output_on_main:
        main_cmd += ["-ot", OUTPUT_ON_MAIN]
        ours += ["--override-tensor", OUTPUT_ON_MAIN]
    if kv != "f16":
        ours += ["--kv", kv]
    left_out = [h.endpoint for h, c in zip(helpers, layout.counts, strict=True) if not c]
    notes = [
        "the main device keeps the input layer (token embeddings, memory-mapped)"
        + (f" and layers 0-{layout.n_main - 1} on its CPU" if layout.n_main else "")
        + ", and runs the sampling; it maps the whole file while loading",
        "rpc-server has no authentication: keep helpers on 127.0.0.1 and reach them over SSH tunnels",
    ]
    if left_out:
        notes.insert(0, f"no layers for {', '.join(left_out)}: the others hold the model; left out of --rpc")
    if costs.output_on_main and shares:
        embd = next(t for t in header.tensors if t.name == TOKEN_EMBD)
        notes.append(
            "tied output: the main device computes the logits from its own token_embd (-ot "
            f"{OUTPUT_ON_MAIN}); without it {shares[-1].name} would hold a {show_size(embd.n_bytes or 0)} "
            f"copy and send back {show_size(4 * (arch.n_vocab or 0))} of logits per token"
        )
    plan = ClusterPlan(
        str(path),
        n_layer,
        n_ctx,
        layout.fits,
        split,
        shares,
        helper_cmds,
        main_cmd,
        ours,
        main=main,
        n_gpu_layers=n_gpu,
        left_out=left_out,
        notes=notes,
        output_on_main=costs.output_on_main,
    )
    if not plan.fits:
        over = [s.name for s in [main, *shares] if not s.fits]
        notes.insert(0, f"does not fit: over budget on {', '.join(over) or 'the devices'} at this context")
        if suggest:
            from edgepilot.cluster.suggest import smallest_changes

            plan.suggestions = smallest_changes(
                (path, header, arch), device, budgets, main_budget, [h.endpoint for h in helpers], n_ctx, kv
            )
    return plan


def as_lines(plan: ClusterPlan) -> list[str]:
    cmds = [*plan.helper_commands, plan.main_command, plan.edgepilot_command]
    return [shlex.join(c) for c in cmds]
