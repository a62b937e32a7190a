"""The human-readable end of a run: counts per partition, faults with the unavailability they caused."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from tests.fault.checker import SAFETY, Report

if TYPE_CHECKING:
    from tests.fault.runner import RunConfig


def replay_command(cfg: RunConfig) -> str:
    cmd = f".venv/bin/python -m tests.fault --seed {cfg.seed}"
    if cfg.scenario is not None:
        return cmd + f" --scenario {cfg.scenario}"
    cmd += f" --duration {cfg.duration_s:g}"
    if cfg.partitions != 3:
        cmd += f" --partitions {cfg.partitions}"
    if tuple(cfg.kinds) != _all_kinds():
        cmd += " --kinds " + ",".join(cfg.kinds)
    return cmd


def _all_kinds() -> tuple[str, ...]:
    from tests.fault.nemesis import DEFAULT_KINDS

    return DEFAULT_KINDS


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    cells = [header, *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]


def render(cfg: RunConfig, report: Report, liveness: list[str], elapsed_s: float) -> str:
    out = [
        f"tidelog fault run: seed={cfg.seed} "
        + (f"scenario={cfg.scenario}" if cfg.scenario else f"duration={cfg.duration_s:g}s")
        + f" partitions={cfg.partitions} elapsed={elapsed_s:.1f}s",
        f"replay: {replay_command(cfg)}",
        f"artifacts: {cfg.artifacts} (history.jsonl, summary.txt, cluster/node*.log)",
        "",
    ]
    cols = ["attempted", "acked", "indeterminate", "indeterminate_present", "final_len", "consumed"]
    rows = [[p.partition, *(getattr(p, c) for c in cols), *(len(getattr(p, k)) for k in SAFETY)]
            for p in report.partitions]
    rows.append(["all", *(sum(r[i] for r in rows) for i in range(1, len(rows[0])))])
    out += _table(["part", "attempted", "acked", "indet", "indet_in_log", "final", "consumed",
                   *SAFETY], rows)
    codes: dict[str, int] = defaultdict(int)
    for p in report.partitions:
        for code, n in p.fail_codes.items():
            codes[code] += n
    if codes:
        out.append("indeterminate writes by error: " + ", ".join(f"{c}={n}" for c, n in sorted(codes.items())))
    out += ["", "faults (times in s since start; window = longest ack gap per partition it overlaps):"]
    frows = []
    for f in report.faults:
        per_p = []
        for p in report.partitions:
            ws = [w["length"] for w in p.windows if f["fault"] in w["faults"]]
            per_p.append(f"{max(ws):.1f}" if ws else "-")
        arrow = "<->" if f["kind"] == "cut-pair" else "->"
        target = f"{f.get('target')}" + (f"{arrow}{f['other']}" if "other" in f else "")
        end = f"{f['end']:.1f}" if f["end"] is not None else "open"
        frows.append([f["fault"], f["kind"], target, f"{f['start']:.1f}", end, *per_p])
    if frows:
        out += _table(["#", "kind", "node", "start", "healed", *(f"p{p.partition}" for p in report.partitions)],
                      frows)
    else:
        out.append("(none)")
    out += ["", "unavailability by fault kind (longest ack gap of any partition, per fault):"]
    by_kind: dict[str, list[float]] = defaultdict(list)
    for f in report.faults:
        ws = [w["length"] for p in report.partitions for w in p.windows if f["fault"] in w["faults"]]
        by_kind[f["kind"]].append(max(ws) if ws else 0.0)
    krows = [[k, len(v), f"{min(v):.1f}", f"{sorted(v)[len(v) // 2]:.1f}", f"{max(v):.1f}"]
             for k, v in sorted(by_kind.items())]
    out += _table(["kind", "n", "min", "median", "max"], krows) if krows else ["(none)"]
    unattributed = [(p.partition, w) for p in report.partitions for w in p.windows if not w["faults"]]
    if unattributed:
        out.append("ack gaps with no fault nearby: " + ", ".join(
            f"p{p} {w['start']:.1f}-{w['end']:.1f}s" for p, w in unattributed))
    out.append("")
    bad = report.violations()
    problems = [*report.notes, *liveness]
    if not bad and not problems:
        out.append("verdict: OK (no acknowledged write lost, duplicated or reordered; reads all committed)")
    else:
        out.append("verdict: FAILED")
        for kind, items in bad.items():
            out.append(f"  {kind}: {len(items)}, first: {items[:3]}")
        out += [f"  {p}" for p in problems]
    return "\n".join(out) + "\n"
