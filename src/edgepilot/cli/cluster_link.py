"""`cluster plan --link`: the single-device speed (given, or from bench's history or the roofline), the
verdict, and the record the doctor compares a run against (rpc-link-slow)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgepilot.cluster.link import Link


def _plan_command(plan: Any, ctx: int, kv: str, main_budget: int | None, link: Link) -> list[str]:
    cmd = ["edgepilot", "cluster", "plan", Path(plan.model).name, "--ctx", str(ctx), "--kv", kv]
    if main_budget is not None:
        cmd += ["--main-budget", f"{main_budget / 2**20:g}MiB"]
    for s in plan.helpers:
        if s.budget_bytes is not None:
            cmd += ["--helper", f"{s.name}={s.budget_bytes / 2**20:g}MiB"]
    return [*cmd, "--link", link.label]


def predict_link(
    plan: Any,
    link: Link,
    speed: tuple[float, float] | None,
    ctx: int,
    kv: str,
    main_budget: int | None,
    root: str,
) -> None:
    """Set plan.link; keep what it predicts for the doctor (a note when the data folder is not writable)."""
    from edgepilot.cluster.link_plan import link_verdict
    from edgepilot.doctor import pool_record
    from edgepilot.errors import UserError

    source, detail = "given", ""
    if speed is None:
        from edgepilot.bench.known_speed import known_speed

        known = known_speed(Path(plan.model), Path(root))
        speed, source, detail = (known.gen_tps, known.prompt_tps), known.source, known.detail
    shares = [
        (s.name, s.first_layer, s.end_layer)
        for s in plan.helpers
        if s.name != "main" and s.end_layer > s.first_layer
    ]
    v = link_verdict(
        plan.model,
        shares,
        ctx,
        kv,
        link,
        speed,
        main_budget,
        128,
        source,
        detail,
        output_on_main=plan.output_on_main,
    )
    plan.link = v
    if not shares:
        return
    alone = v.single
    record = pool_record.PoolRecord(
        rpc=[s[0] for s in shares],
        model=Path(plan.model).name,
        link=link.label,
        gen_tps=round(v.pool.gen_tps, 2),
        prompt_tps=round(v.pool.prompt_tps, 2),
        speed_source=source,
        alternative=alone.description if alone else None,
        alternative_tps=round(alone.gen_tps, 2) if alone else None,
        alternative_command=list(alone.llama_cpp_args) if alone else [],
        other_links=v.other_links,
        plan_command=_plan_command(plan, ctx, kv, main_budget, link),
    )
    try:
        pool_record.save(record)
    except UserError as exc:
        plan.notes.append(f"the prediction was not kept for `edgepilot doctor` ({exc})")
