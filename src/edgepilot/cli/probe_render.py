"""Human rendering of `probe` and `snapshot save` results (rich tables; rich is imported to render, so
`--json` never loads it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgepilot.cli.format import human_bytes

if TYPE_CHECKING:
    from rich.console import Console

    from edgepilot.device.gpu import VulkanDevice
    from edgepilot.device.opencl import OpenCLDevice
    from edgepilot.device.probe import Probe
    from edgepilot.device.snapshot import SnapshotResult


def _facts() -> list[tuple[str, str]]:
    """(label, value) lines for narrow.print_pairs, which never splits a word (a path stays whole)."""
    return []


def _row(facts: list[tuple[str, str]], label: str, value: str) -> None:
    # Device strings (core and GPU names, cgroup paths) come from files: print_pairs never reads them as
    # rich markup, and shows their control characters escaped.
    facts.append((label, value))


def _yes_no(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "no")


def _check(check: dict[str, Any] | None) -> str:
    """The driver check in a few words: `ok 3.1 s`, `SIGSEGV`, `hung`, `not run`, `-` (not listed)."""
    if not check:
        return "-"
    outcome = "rescued" if check.get("runs_without_repack") else check.get("outcome")
    if outcome == "ok":
        return f"ok {check.get('seconds', 0):.1f} s" + (" (cached)" if check.get("cached") else "")
    if outcome == "crashed":
        return str(check.get("signal") or "crashed")
    if outcome == "failed":
        return f"exit {check.get('exit_code')}"
    return "not run" if outcome == "not-run" else str(outcome)


def _gpu_facts(g: VulkanDevice) -> str:
    """What decides offload, in one line: UMA, fp16, subgroup size, BDA, memory (from vulkaninfo and the
    check's ggml_vulkan line)."""
    device = ((g.check or {}).get("facts") or {}).get("device") or {}
    parts = []
    if "uma" in device:
        parts.append(f"uma {_yes_no(device['uma'])}")
    if "fp16" in device:
        parts.append(f"fp16 {_yes_no(device['fp16'])}")
    warp = device.get("warp_size") or g.subgroup_size
    if warp:
        parts.append(f"subgroup {warp}")
    if g.storage_16bit is not None:
        parts.append(f"16-bit storage {_yes_no(g.storage_16bit)}")
    if g.buffer_device_address is not None:
        parts.append(f"BDA {_yes_no(g.buffer_device_address)}")
    if device.get("matrix_cores") not in (None, "none"):
        parts.append(f"matrix cores {device['matrix_cores']}")
    if g.llama_total_bytes is not None:
        free = f", {human_bytes(g.llama_free_bytes)} free" if g.llama_free_bytes is not None else ""
        parts.append(f"memory {human_bytes(g.llama_total_bytes)}{free}")
    return " · ".join(parts)


def render_probe(p: Probe, out: Console) -> None:
    from edgepilot.cli.narrow import Column, print_pairs, print_records, say

    cpu, mem = p.cpu, p.memory
    facts = _facts()
    bits = f"{cpu.userland_bits or '?'}-bit userland on a {cpu.cpu_bits or '?'}-bit CPU"
    _row(facts, "cpu", f"{cpu.arch or '?'} · {bits} · {cpu.cores} cores")
    if cpu.model_name or cpu.hardware:
        _row(facts, "", " · ".join(x for x in (cpu.model_name, cpu.hardware) if x))
    _row(facts, "simd", ", ".join(cpu.simd) or "-")
    repack = ", ".join(f"{k} {v}" for k, v in cpu.repack.items())
    _row(facts, "repack", repack or "none (no CPU_REPACK copies)")
    avail = human_bytes(mem.available_bytes)
    _row(facts, "memory", f"{human_bytes(mem.total_bytes)} total · {avail} available")
    swap = f"{human_bytes(mem.swap_total_bytes)} swap" + (" (zram)" if mem.zram else "")
    extra = [swap]
    if mem.psi_some_avg10 is not None:
        extra.append(f"PSI some avg10 {mem.psi_some_avg10:g}")
    if mem.cgroup_limit_bytes is not None:
        extra.append(f"cgroup limit {human_bytes(mem.cgroup_limit_bytes)}")
    _row(facts, "", " · ".join(extra))
    bw = p.memory_bandwidth
    if bw is not None:
        kept = " (kept)" if bw.get("cached") else ""
        _row(facts, "bandwidth", f"{bw['gb_per_s']:.1f} GB/s read{kept}" if bw.get("bytes_per_s") else "-")
        _row(facts, "", str(bw.get("how") or bw.get("why")))
        if bw.get("latest_bytes_per_s"):
            _row(facts, "", f"measured {bw['latest_bytes_per_s'] / 1e9:.1f} GB/s now: the best is kept")
    if p.android is not None:
        a = p.android
        device = " ".join(x for x in (a.manufacturer, a.model) if x) or "?"
        termux = f"Termux {a.termux_version or ''}".strip() if a.termux else "not Termux"
        _row(facts, "android", f"{device} · SDK {a.sdk or '?'} · {a.soc or '?'} · {termux}")
        if a.phantom_process_note:
            _row(facts, "", a.phantom_process_note)
    hot = p.hottest
    if hot is not None:
        zones = len(p.thermal)
        _row(facts, "thermal", f"hottest {hot.type or hot.zone} {hot.celsius:.1f} °C ({zones} zones)")
    if p.battery is not None:
        b = p.battery
        watts = f" · {b.watts:g} W" if b.watts is not None else ""
        _row(facts, "battery", f"{b.capacity_percent or '?'}% · {b.status or '?'}{watts}")
    if p.engine is not None:
        e = p.engine
        if e.get("kind") is None:
            _row(facts, "engine", f"none: {e.get('why')}")
        else:
            where = "in-process" if e["kind"] == "inprocess" else "llama.cpp's programs"
            _row(facts, "engine", f"{where} · {e.get('version') or 'version unknown'}")
            _row(facts, "", str(e.get("path") or "?"))
            _row(facts, "", _cpu_check_line(e))
    print_pairs(out, facts, gap=2, label_style="bold")
    note = p.engine.get("cpu_note") if p.engine else None
    if note:
        say(out, f"note: {note}", style="yellow")

    rows = []
    for cl in cpu.clusters:
        mhz = str(cl.max_mhz) if cl.max_mhz else "?"
        if cl.scaling_max_mhz:
            mhz += f" (capped {cl.scaling_max_mhz})"
        rows.append([",".join(map(str, cl.cpus)), cl.core or "?", mhz, cl.kind])
    columns = [Column("cpus"), Column("core"), Column("max MHz", numeric=True), Column("kind")]
    print_records(out, columns, rows, title="CPU clusters (fastest first)")

    if p.gpus:
        rows = [
            [
                g.name,
                g.llama_cpp_name or "-",
                g.api_version or "?",
                g.driver or "?",
                g.verdict,
                _check(g.check),
            ]
            for g in p.gpus
        ]
        columns = [
            Column("device"),
            Column("llama.cpp"),
            Column("api"),
            Column("driver"),
            Column("verdict"),
            Column("check"),
        ]
        print_records(out, columns, rows, title="GPUs")
        for g in p.gpus:
            label = g.llama_cpp_name or g.name
            facts = _gpu_facts(g)
            if facts:
                say(out, f"  {label}: {facts}")
            for reason in g.reasons:
                say(out, f"  {label}: {reason}")

    _render_opencl(p.opencl, out)

    for s in p.storage.paths:
        speed = "SLOW" if s.slow else "ok"
        free = f" · {human_bytes(s.free_bytes)} free" if s.free_bytes is not None else ""
        say(out, f"storage {s.path}: {s.fstype or '?'} on {s.mount_point or '?'} ({speed}){free}")
        if s.note:
            say(out, f"  {s.note}")

    notes = [*cpu.reasons, *mem.reasons, *p.storage.reasons]
    if p.android is not None:
        notes += p.android.reasons
    for section in p.reasons.values():
        notes += section
    for note in notes:
        say(out, f"note: {note}", style="dim")


OPENCL_VERDICTS = {"supported": "supported", "not-supported": "not supported", "unknown": "unknown"}


def _opencl_facts(d: OpenCLDevice) -> str:
    """What decides ggml-opencl, in one line: generation, compiler, the types it is fast for."""
    parts = []
    if d.family == "adreno":
        parts.append(f"Adreno {d.adreno_generation or d.adreno_model or '?'}")
    if d.compiler:
        parts.append(f"compiler {d.compiler}")
    if d.max_alloc_bytes:
        parts.append(f"max buffer {human_bytes(d.max_alloc_bytes)}")
    if d.fast_types:
        parts.append(f"fast for {', '.join(d.fast_types)}")
    if d.recommended_quant:
        parts.append(f"K-quants slower: requantize to {d.recommended_quant} (`edgepilot fit` prints how)")
    return " · ".join(parts)


def _render_opencl(devices: list[OpenCLDevice], out: Console) -> None:
    from edgepilot.cli.narrow import Column, print_records, say

    if not devices:
        return
    rows = [
        [
            d.name,
            d.llama_cpp_name or "-",
            d.opencl_c_version or "?",
            d.compiler or d.driver_version or "?",
            OPENCL_VERDICTS.get(d.verdict, d.verdict),
        ]
        for d in devices
    ]
    columns = [Column("device"), Column("llama.cpp"), Column("OpenCL C"), Column("driver"), Column("verdict")]
    print_records(out, columns, rows, title="OpenCL devices (verdict: ggml-opencl's rules)")
    for d in devices:
        # one device (a phone): the lines hang under a bullet; several: each names its device
        label = "·" if len(devices) == 1 else f"{d.llama_cpp_name or d.name.split()[0]}:"
        for line in [_opencl_facts(d), *d.reasons]:
            if line:
                say(out, f"  {label} {line}")


def render_snapshot(result: SnapshotResult, out: Console) -> None:
    from edgepilot.cli.narrow import print_command, say

    kind = "archive" if result.archive else "directory"
    say(
        out,
        f"saved {kind} {result.path}: {result.files} files, {result.commands} command outputs, "
        f"{result.missing} unreadable (kept as reasons)",
    )
    print_command(out, "replay with:", ["edgepilot", "probe", "--root", str(result.path)], style="")


def _cpu_check_line(e: dict[str, Any]) -> str:
    """What the CPU check of the engine's llama.cpp found (engine/cpu_check.py), in a few words."""
    check = e.get("cpu_check")
    if not check:
        return "not checked on this CPU yet: --check-engine runs it"
    outcome = "rescued" if check.get("runs_without_repack") else check.get("outcome")
    when = str(check.get("full", {}).get("checked_at") or "")[:10]
    words = {
        "ok": "runs on this CPU",
        "rescued": "crashes repacked: runs with --no-repack",
        "crashed": "crashes on this CPU",
    }.get(outcome, f"check: {outcome}")
    return f"{words} (checked {when})" if when else words
