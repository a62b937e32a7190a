"""Offsets: partition snapshots, resolving offset specs, planning read ranges.

Offsets in the checkpoint (and in ``startingOffsets`` JSON) are *next offsets
to read*, nested ``{topic: {"partition": offset}}`` with string partition keys
because the checkpoint is JSON. Internally a flat ``{(topic, partition):
offset}`` map is used. All functions here run on the driver (or Spark's
planner worker); only :class:`OffsetRange` travels to executors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.spark.nodes import NodePool, TidelogError
from app.spark.options import EARLIEST, LATEST, Isolation, OffsetSpec, OptionError

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]


class DataLossError(RuntimeError):
    """Records the query should have read are gone (retention, deletion, truncation)."""


DATA_LOSS_HINT = (
    "Set the option failOnDataLoss=false to skip the missing records and continue."
)


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition's offsets at the moment of the snapshot.

    ``end`` is the first offset *not* visible at the requested isolation: the
    high watermark for ``committed``, the log end offset for ``uncommitted``.
    An offline partition (no live leader) reports no offsets: ``online`` is
    false and both are -1.
    """

    topic: str
    partition: int
    log_start: int
    end: int
    online: bool = True


def snapshot(pool: NodePool, topics: Iterable[str], isolation: Isolation,
             missing_ok: bool) -> dict[TopicPartition, PartitionInfo]:
    """Describe ``topics``; a missing topic raises, or with ``missing_ok`` has no partitions.

    Streaming queries pass ``missing_ok`` so a subscribed topic created later
    is picked up (from earliest) instead of failing the query.
    """
    out: dict[TopicPartition, PartitionInfo] = {}
    for topic in topics:
        try:
            desc = pool.call(lambda c, t=topic: c.describe_topic(t))  # type: ignore[misc]
        except TidelogError as e:
            if e.code == "TOPIC_NOT_FOUND" and missing_ok:
                continue
            if e.code == "TOPIC_NOT_FOUND":
                raise OptionError(f"tidelog: topic {topic!r} does not exist") from e
            raise
        for ps in desc["partitions"]:
            end = ps.get("high_watermark" if isolation == "committed" else "log_end_offset")
            start = ps.get("log_start_offset")
            p = int(ps["partition"])
            if start is None or end is None:
                out[(topic, p)] = _probe(pool, topic, p, isolation)
            else:
                out[(topic, p)] = PartitionInfo(topic, p, int(start), int(end))
    return out


def _probe(pool: NodePool, topic: str, partition: int, isolation: Isolation) -> PartitionInfo:
    """Offsets of a partition the answering node does not host, from its leader.

    A node's topic description only carries offsets for partitions it has a
    replica of (nodes do not share offsets in metadata), but a fetch is
    forwarded to the leader and its answer carries them. No leader (after
    retries): offline.
    """
    try:
        page = pool.call(lambda c: c.fetch(topic, partition, "latest", max_records=1,
                                           isolation=isolation))
    except TidelogError as e:
        if e.code in ("NOT_LEADER", "UNAVAILABLE"):
            return PartitionInfo(topic, partition, -1, -1, online=False)
        raise
    end = page.high_watermark if isolation == "committed" else page.log_end_offset
    return PartitionInfo(topic, partition, page.log_start_offset, end)


def offset_for_timestamp(pool: NodePool, tp: TopicPartition, timestamp_ms: int,
                         isolation: Isolation) -> int:
    """First offset whose timestamp is >= ``timestamp_ms``; the visible end if there is none."""
    page = pool.call(lambda c: c.fetch(tp[0], tp[1], timestamp=timestamp_ms, max_records=1,
                                       isolation=isolation))
    return int(page.records[0]["offset"]) if page.records else page.next_offset


def resolve(spec: OffsetSpec, parts: Mapping[TopicPartition, PartitionInfo], name: str,
            default_missing: int) -> Offsets:
    """Turn a spec into concrete offsets for every partition in ``parts``.

    Partitions the JSON does not mention get ``default_missing`` (EARLIEST or
    LATEST); a JSON partition that does not exist is an error, since a typo
    would otherwise read nothing without a word. An offline partition resolves
    to -1 unless the JSON gives it a concrete offset.
    """
    if isinstance(spec, dict):
        for topic, per in spec.items():
            for p in per:
                if (topic, p) not in parts:
                    raise OptionError(f"option {name} names {topic}/{p}, which does not exist")
    out: Offsets = {}
    for tp, info in parts.items():
        if spec == "earliest":
            want = EARLIEST
        elif spec == "latest":
            want = LATEST
        else:
            assert isinstance(spec, dict)
            want = spec.get(tp[0], {}).get(tp[1], default_missing)
        if want >= 0:
            out[tp] = want
        elif not info.online:
            out[tp] = -1
        else:
            out[tp] = info.log_start if want == EARLIEST else info.end
    return out


def to_json_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Flat map → the nested, string-keyed dict Spark stores in the checkpoint (sorted)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, p), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(p)] = int(off)
    return out


def from_json_offsets(doc: Mapping[str, Mapping[str, int]]) -> Offsets:
    """Inverse of :func:`to_json_offsets`."""
    return {(topic, int(p)): int(off) for topic, per in doc.items() for p, off in per.items()}


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic-partition: one Spark task reads it.

    ``from_earliest`` marks a partition discovered after the query started:
    its planned start (0) is clamped to the log start offset at read time
    without counting as data loss, because those records were never promised.
    """

    topic: str
    partition: int
    start: int
    end: int
    from_earliest: bool = False


def plan_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                max_records: int,
                new_start: Mapping[TopicPartition, int] | None = None) -> list[OffsetRange]:
    """Ranges for every partition in ``end``, split so none spans more than ``max_records``.

    A partition absent from ``start`` is new: it is read from its log start
    as far as known (``new_start``, else 0) and all its ranges are
    ``from_earliest``. Ordered by topic, partition, start so batch output
    order is deterministic.
    """
    out: list[OffsetRange] = []
    for tp in sorted(end):
        new = tp not in start
        lo = (new_start or {}).get(tp, 0) if new else start[tp]
        hi = end[tp]
        while lo < hi:
            step_hi = min(hi, lo + max_records)
            out.append(OffsetRange(tp[0], tp[1], lo, step_hi, new))
            lo = step_hi
    return out


def cap_rows(begin: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
             max_rows: int) -> Offsets:
    """Limit the total of ``end - begin`` to ``max_rows``, shared by backlog.

    Each partition gets its proportional share rounded down; the rows lost
    to rounding go one each to partitions in sorted order, so the total is
    exactly ``min(max_rows, backlog)`` and a small limit still makes progress.
    """
    backlog = {tp: max(0, end[tp] - begin.get(tp, end[tp])) for tp in end}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(end)
    share = {tp: backlog[tp] * max_rows // total for tp in backlog}
    left = max_rows - sum(share.values())
    for tp in sorted(backlog):
        if left == 0:
            break
        if share[tp] < backlog[tp]:
            share[tp] += 1
            left -= 1
    return {tp: begin.get(tp, end[tp]) + share[tp] for tp in end}
