"""Batch and streaming readers.

Planning (offset resolution, ``latestOffset``) runs on the driver side and
asks the cluster for partition metadata; :func:`read_range` runs in executor
Python workers and is stateless: it gets an :class:`OffsetRange` and the
parsed options, opens its own :class:`NodePool`, fetches the range page by
page and yields one Arrow batch per page.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from app.spark.offsets import (
    DATA_LOSS_HINT,
    DataLossError,
    OffsetRange,
    Offsets,
    PartitionInfo,
    TopicPartition,
    cap_rows,
    from_json_offsets,
    offset_for_timestamp,
    plan_ranges,
    resolve,
    snapshot,
    to_json_offsets,
)
from app.spark.options import EARLIEST, LATEST, OptionError, ReadOptions

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from app.spark.nodes import NodePool


STALL_RETRIES = 5
STALL_WAIT_MS = 1000
"""A range whose end is not visible is re-polled this many times, this long, before data loss."""


class TidelogPartition(InputPartition):
    """A Spark input partition carrying one :class:`OffsetRange` (picklable)."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.rng = rng


def _pool(opts: ReadOptions) -> NodePool:
    from app.spark.nodes import NodePool

    return NodePool(opts.servers, timeout_s=opts.timeout_s)


def read_range(opts: ReadOptions, rng: OffsetRange, schema: StructType) -> Iterator[pa.RecordBatch]:
    """Fetch ``[rng.start, rng.end)`` and yield it as Arrow batches.

    Data loss (the log start moved past the next offset, or the partition now
    ends before ``rng.end``) raises :class:`DataLossError` when
    ``failOnDataLoss`` is on; otherwise the missing records are skipped. A
    range of a newly discovered partition starts at its log start silently.
    """
    from app.spark.nodes import TidelogError
    from app.spark.schema import arrow_schema, to_batch

    aschema = arrow_schema(schema)
    where = f"{rng.topic}/{rng.partition}"
    cur = rng.start
    stalls = 0
    with _pool(opts) as pool:
        while cur < rng.end:
            want = min(opts.fetch_max_records, rng.end - cur)
            wait_ms = STALL_WAIT_MS if stalls else 0
            try:
                page = pool.call(lambda c, at=cur, n=want, w=wait_ms: c.fetch(  # type: ignore[misc]
                    rng.topic, rng.partition, at, max_records=n, isolation=opts.isolation,
                    max_wait_ms=w))
            except TidelogError as e:
                if e.code != "OFFSET_OUT_OF_RANGE":
                    raise
                log_start = int(e.body.get("log_start_offset", -1))
                if cur < log_start:
                    if not (rng.from_earliest or not opts.fail_on_data_loss):
                        raise DataLossError(
                            f"tidelog: records {where} offsets "
                            f"{cur}..{min(log_start, rng.end) - 1} "
                            f"were removed (retention or deletion) before this query read them; "
                            f"the partition now starts at {log_start}. {DATA_LOSS_HINT}") from None
                    cur = min(log_start, rng.end)
                    continue
                end = int(e.body.get("high_watermark", -1))
                if opts.fail_on_data_loss:
                    raise DataLossError(
                        f"tidelog: {where} now ends at {end}, before offset {cur} that this query "
                        f"planned to read up to {rng.end} (log truncated after a leader change?). "
                        f"{DATA_LOSS_HINT}") from None
                return
            recs = [r for r in page.records if cur <= r["offset"] < rng.end]
            if recs:
                yield to_batch(recs, rng.topic, rng.partition, aschema)
            if page.next_offset <= cur:
                # No progress: the visible end is below the planned end. A new leader's
                # high watermark can lag for a moment, so long-poll a few times first.
                stalls += 1
                if stalls <= STALL_RETRIES:
                    continue
                if opts.fail_on_data_loss:
                    raise DataLossError(
                        f"tidelog: {where} has no records past {cur} although {rng.end} was "
                        f"planned (visible end is {page.high_watermark}). {DATA_LOSS_HINT}")
                return
            cur = page.next_offset
            stalls = 0


class TidelogBatchReader(DataSourceReader):
    """``spark.read.format("tidelog")``: fixed ranges resolved once, at planning."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts
        with _pool(opts) as pool:
            parts = snapshot(pool, opts.topics, opts.isolation, missing_ok=False)
            if opts.starting_timestamp_ms is not None:
                ts = opts.starting_timestamp_ms
                start = {tp: offset_for_timestamp(pool, tp, ts, opts.isolation) if i.online else -1
                         for tp, i in parts.items()}
            else:
                start = resolve(opts.starting, parts, "startingOffsets", EARLIEST)
        end = resolve(opts.ending, parts, "endingOffsets", LATEST)
        for tp, info in parts.items():
            lo, hi = start[tp], end[tp]
            if not info.online:
                if lo < 0 or hi < 0:
                    raise OptionError(
                        f"tidelog: {tp[0]}/{tp[1]} is offline (no live leader), so its offsets "
                        "are unknown; retry later or pin it in startingOffsets/endingOffsets")
                continue
            if hi > info.end:
                raise OptionError(
                    f"endingOffsets {hi} for {tp[0]}/{tp[1]} is past its end {info.end}")
            if lo > hi:
                raise OptionError(f"startingOffsets {lo} for {tp[0]}/{tp[1]} is after the "
                                  f"ending offset {hi}")
            if lo < info.log_start:
                if opts.fail_on_data_loss:
                    raise DataLossError(
                        f"tidelog: startingOffsets {lo} for {tp[0]}/{tp[1]} is before its log "
                        f"start {info.log_start}; those records no longer exist. "
                        f"{DATA_LOSS_HINT}")
                start[tp] = info.log_start
        ranges = plan_ranges(start, end, opts.max_records_per_partition)
        return [TidelogPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # With no ranges planned Spark still runs one task with a placeholder partition.
        if isinstance(partition, TidelogPartition):
            yield from read_range(self.opts, partition.rng, self.schema)


class TidelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("tidelog")``: offsets are next-offset-per-partition JSON.

    The planner-side instance keeps a pool and, under ``Trigger.AvailableNow``,
    the target offsets fixed by :meth:`prepareForTriggerAvailableNow`; the
    executor-side copies only ever run :meth:`read`.
    """

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._nodes: NodePool | None = None
        self._target: Offsets | None = None
        self._last_seen: Offsets | None = None

    def _pool(self) -> NodePool:
        if self._nodes is None:
            self._nodes = _pool(self.opts)
        return self._nodes

    def _snapshot(self) -> dict[TopicPartition, PartitionInfo]:
        return snapshot(self._pool(), self.opts.topics, self.opts.isolation, missing_ok=True)

    def initialOffset(self) -> dict[str, Any]:
        """Where a query without a checkpoint starts; topics missing now start at earliest later."""
        opts = self.opts
        parts = self._snapshot()
        if opts.starting_timestamp_ms is not None:
            start = {tp: offset_for_timestamp(self._pool(), tp, opts.starting_timestamp_ms,
                                              opts.isolation) for tp, i in parts.items() if i.online}
        else:
            start = resolve(opts.starting, parts, "startingOffsets", LATEST)
        # An offline partition with no pinned offset is left out: found later, read from earliest.
        return to_json_offsets({tp: off for tp, off in start.items() if off >= 0})

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_records_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end of an AvailableNow run: later records and partitions are left out."""
        # Offline partitions get -1: they keep their checkpointed offset for this run.
        self._target = {tp: info.end for tp, info in self._snapshot().items()}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end offsets of the next micro-batch; ``start`` itself when there is nothing new.

        Every partition present now is included; one missing from ``start``
        is new and counted from its log start. A partition in ``start`` that
        no longer exists is data loss. Ends never move backwards.
        """
        begin = from_json_offsets(start)
        parts = self._snapshot()
        gone = sorted(set(begin) - set(parts))
        if gone and self.opts.fail_on_data_loss:
            names = ", ".join(f"{t}/{p}" for t, p in gone)
            raise DataLossError(f"tidelog: partitions {names} no longer exist (topic deleted?). "
                                f"{DATA_LOSS_HINT}")
        # An offline partition stays where it is (or stays unknown) until it has a leader again.
        available = {tp: info.end for tp, info in parts.items() if info.online}
        available.update({tp: begin[tp] for tp, info in parts.items()
                          if not info.online and tp in begin})
        self._last_seen = dict(available)
        if self._target is not None:
            available = {tp: min(off, self._target[tp]) for tp, off in available.items()
                         if tp in self._target}
        first = {tp: begin[tp] if tp in begin else parts[tp].log_start for tp in available}
        end = {tp: max(off, first[tp]) for tp, off in available.items()}
        if isinstance(limit, ReadMaxRows):
            end = cap_rows(first, end, limit.max_rows)
        elif isinstance(limit, ReadMinRows) and sum(end[tp] - first[tp] for tp in end) < (
            limit.min_rows
        ):
            return start
        out = to_json_offsets(end)
        return start if from_json_offsets(out) == begin else out

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None if self._last_seen is None else to_json_offsets(self._last_seen)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = from_json_offsets(start)
        stop = from_json_offsets(end)
        new_start: Offsets = {}
        if any(tp not in begin for tp in stop):
            # Start new partitions at their log start now rather than at 0, so a long
            # retained-away prefix does not turn into empty tasks.
            parts = self._snapshot()
            new_start = {tp: min(parts[tp].log_start, stop[tp]) for tp in stop
                         if tp not in begin and tp in parts and parts[tp].online}
        ranges = plan_ranges(begin, stop, self.opts.max_records_per_partition, new_start)
        return [TidelogPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # With no ranges planned Spark still runs one task with a placeholder partition.
        if isinstance(partition, TidelogPartition):
            yield from read_range(self.opts, partition.rng, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: tidelog keeps no consumer state; the checkpoint is the position."""

    def stop(self) -> None:
        if self._nodes is not None:
            self._nodes.close()
            self._nodes = None
