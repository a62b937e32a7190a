"""Judges a history: what was acknowledged, what the logs hold at the end, what consumers saw.

Safety (each must be zero; the run fails otherwise):
- **lost**: an acks=all write acknowledged at offset ``o`` is not in the final
  log at ``o`` (absent, or elsewhere). Seed 001 §6.4: an acknowledged record
  is committed, and a committed record is never lost or moved.
- **duplicated**: an id appears more than once in a final log. The producer
  never resends an id, so only the cluster can duplicate one.
- **reordered**: write ``a`` was acknowledged before write ``b`` was sent to
  the same partition, yet ``b`` sits at a lower offset in the final log.
- **phantom**: a final log holds a record nobody produced.
- **vanished reads**: a committed read returned ``(offset, id)`` that the final
  log does not hold at that offset: the consumer saw uncommitted data, or
  committed data was later truncated (seed 001 §6.4.2 applied-HW rule).
- **read gaps**: a consumer's read started past the offset it asked for,
  skipping committed records.

Indeterminate writes (failed or timed out) may be in the log or not; they
are counted both ways, never judged. Availability is measured, not judged:
an *unavailability window* is a gap between successive acknowledgements of
a partition longer than ``gap_s``, listed with the faults that overlap it.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

SAFETY = ("lost", "duplicated", "reordered", "phantom", "vanished_reads", "read_gaps")


@dataclass
class PartitionReport:
    partition: int
    attempted: int = 0
    acked: int = 0
    indeterminate: int = 0
    indeterminate_present: int = 0
    final_len: int = 0
    consumed: int = 0
    lost: list[dict[str, Any]] = field(default_factory=list)
    duplicated: list[dict[str, Any]] = field(default_factory=list)
    reordered: list[dict[str, Any]] = field(default_factory=list)
    phantom: list[dict[str, Any]] = field(default_factory=list)
    vanished_reads: list[dict[str, Any]] = field(default_factory=list)
    read_gaps: list[dict[str, Any]] = field(default_factory=list)
    windows: list[dict[str, Any]] = field(default_factory=list)
    fail_codes: dict[str, int] = field(default_factory=dict)


@dataclass
class Report:
    partitions: list[PartitionReport]
    faults: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def count(self, what: str) -> int:
        return sum(len(getattr(p, what)) for p in self.partitions)

    @property
    def ok(self) -> bool:
        return all(self.count(k) == 0 for k in SAFETY) and not self.notes

    def violations(self) -> dict[str, list[dict[str, Any]]]:
        """Every safety violation by kind, with the partition, for the failure message."""
        return {k: [{"partition": p.partition, **v} for p in self.partitions for v in getattr(p, k)]
                for k in SAFETY if self.count(k)}


def check(events: list[dict[str, Any]], partitions: int, gap_s: float = 1.0) -> Report:
    """Judge ``events`` (a run's history, including its ``final`` reads)."""
    finals = {e["partition"]: e["records"] for e in events if e["type"] == "final"}
    final_t = {e["partition"]: e["t"] for e in events if e["type"] == "final"}
    faults = _faults(events)
    report = Report([PartitionReport(p) for p in range(partitions)], faults)
    for p in range(partitions):
        if p not in finals:
            report.notes.append(f"partition {p}: no final read (the cluster never settled?)")
    invoked = {e["id"]: e for e in events if e["type"] == "invoke"}
    by_part: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if "partition" in e:
            by_part[e["partition"]].append(e)
    for pr in report.partitions:
        final = finals.get(pr.partition, [])
        _check_partition(pr, by_part[pr.partition], final, invoked, final_t.get(pr.partition))
        pr.windows = _windows(by_part[pr.partition], faults, gap_s)
    return report


def _check_partition(pr: PartitionReport, evs: list[dict[str, Any]], final: list[list[Any]],
                     invoked: dict[str, dict[str, Any]], final_t: float | None) -> None:
    have_final = final_t is not None
    pr.final_len = len(final)
    at: dict[int, str | None] = {}
    where: dict[str | None, list[int]] = defaultdict(list)
    for off, rid in final:
        at[off] = rid
        where[rid].append(off)
    oks = [e for e in evs if e["type"] == "ok"]
    fails = [e for e in evs if e["type"] == "fail"]
    pr.attempted = sum(1 for e in evs if e["type"] == "invoke")
    pr.acked = len(oks)
    pr.indeterminate = len(fails)
    pr.indeterminate_present = sum(1 for e in fails if e["id"] in where)
    pr.fail_codes = dict(Counter(e["code"] for e in fails))
    if have_final:
        for e in oks:
            if at.get(e["offset"]) != e["id"]:
                pr.lost.append({"id": e["id"], "acked_offset": e["offset"], "acked_t": e["t"],
                                "found_at": where.get(e["id"], []),
                                "final_at_acked_offset": at.get(e["offset"], "<absent>")})
    for rid, offs in where.items():
        if rid is None or rid not in invoked:
            pr.phantom += [{"offset": o, "id": rid} for o in offs]
        elif len(offs) > 1:
            pr.duplicated.append({"id": rid, "offsets": offs})
    pr.reordered = _reorderings(oks, where)
    _check_reads(pr, evs, at, final_t, len(final))


def _reorderings(oks: list[dict[str, Any]], where: dict[str | None, list[int]]) -> list[dict[str, Any]]:
    """Pairs (a, b) with a acked before b was invoked but b placed before a.

    Sweep in invocation order, keeping the acks completed before each invocation;
    only the largest final offset among them matters.
    """
    placed = [(e, where[e["id"]][0]) for e in oks if where.get(e["id"])]
    by_ack = sorted(placed, key=lambda x: x[0]["t"])
    ack_times = [x[0]["t"] for x in by_ack]
    out = []
    best: tuple[int, dict[str, Any]] | None = None
    i = 0
    for e, off in sorted(placed, key=lambda x: x[0]["invoked"]):
        j = bisect.bisect_left(ack_times, e["invoked"])
        while i < j:
            a, a_off = by_ack[i]
            if best is None or a_off > best[0]:
                best = (a_off, a)
            i += 1
        if best is not None and best[0] > off:
            out.append({"earlier": best[1]["id"], "earlier_offset": best[0], "earlier_acked_t": best[1]["t"],
                        "later": e["id"], "later_offset": off, "later_invoked_t": e["invoked"]})
    return out


def _check_reads(pr: PartitionReport, evs: list[dict[str, Any]], at: dict[int, str | None],
                 final_t: float | None, final_len: int) -> None:
    """Reads against the final log. A read past the final log's end is judged only if it
    happened before the final read (a write whose ack timed out may commit after it)."""
    expected = 0
    for e in evs:
        if e["type"] != "read":
            continue
        recs = [r for r in e["records"] if r[0] >= e["offset"]]  # a batch may start earlier
        if recs and recs[0][0] != e["offset"]:
            pr.read_gaps.append({"t": e["t"], "asked": e["offset"], "got_first": recs[0][0], "node": e["node"]})
        if e["offset"] < expected:
            pr.read_gaps.append({"t": e["t"], "asked": e["offset"], "already_read_to": expected,
                                 "node": e["node"]})
        for off, rid in recs:
            pr.consumed += 1
            judged = final_t is not None and (off < final_len or e["t"] < final_t)
            if judged and at.get(off, "<absent>") != rid:
                pr.vanished_reads.append({"t": e["t"], "offset": off, "id": rid, "node": e["node"],
                                          "final": at.get(off, "<absent>")})
        if recs:
            expected = recs[-1][0] + 1


def _faults(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each fault as ``{fault, kind, target, start, end, recovered, ...}``: when it began, when it
    was healed, and when the cluster was healthy again afterwards (None if never)."""
    open_: dict[int, dict[str, Any]] = {}
    out = []
    for e in events:
        if e["type"] == "fault-start":
            f = {k: v for k, v in e.items() if k not in ("t", "type")}
            f |= {"start": e["t"], "end": None, "recovered": None}
            open_[e["fault"]] = f
            out.append(f)
        elif e["type"] == "fault-end" and e["fault"] in open_:
            open_[e["fault"]]["end"] = e["t"]
        elif e["type"] == "healthy" and e.get("fault") in open_:
            open_.pop(e["fault"])["recovered"] = e["t"]
    return out


def _windows(evs: list[dict[str, Any]], faults: list[dict[str, Any]], gap_s: float) -> list[dict[str, Any]]:
    """Gaps longer than ``gap_s`` between successive acks of one partition, with overlapping faults.

    The gap runs from the last ack before it to the first ack after it. A gap
    still open when producers stopped is closed at the last event, flagged.
    """
    acks = [e["t"] for e in evs if e["type"] == "ok"]
    out = []
    for a, b in itertools.pairwise(acks):
        if b - a > gap_s:
            out.append(_window(a, b, faults, open_at_end=False))
    writes = [e["t"] for e in evs if e["type"] in ("invoke", "ok", "fail")]
    last_t = writes[-1] if writes else 0.0
    if acks and last_t - acks[-1] > gap_s:
        out.append(_window(acks[-1], last_t, faults, open_at_end=True))
    return out


def _window(a: float, b: float, faults: list[dict[str, Any]], open_at_end: bool) -> dict[str, Any]:
    """A window belongs to the latest fault that started before it ended and had not yet been
    repaired (cluster healthy again) when it began; none when it began on a healthy cluster."""
    cause = None
    for f in faults:
        repaired = f.get("recovered") or f["end"]
        if f["start"] <= b and (repaired is None or repaired >= a):
            cause = f
    return {"start": a, "end": b, "length": round(b - a, 3), "faults": [] if cause is None else [cause["fault"]],
            "kind": cause["kind"] if cause else None,
            "after_fault_start": round(a - cause["start"], 3) if cause else None, "open_at_end": open_at_end}
