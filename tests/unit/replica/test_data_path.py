"""The replication data path in one process: real logs, the real leader endpoint handler
(``serve_replica_fetch``), the binary framing and the follower's core state.

No sockets: a fake node hands the handler its partitions; the follower side is
driven the way ``app/replica/fetcher.py`` drives it. Covers acks=all waiting on
the HW, divergence truncation of a deposed leader (KIP-101/KIP-320, seed 001
§6.6) and the waiters of a deposed leader.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from app.partition import PartitionGone, PartitionReplica
from app.records import ProducedRecord
from app.replica.serve import serve_replica_fetch
from app.replica.wire import decode_answers
from app.storage import LogConfig, PartitionLog
from replication.controller.image import PartitionMeta, TopicConfig
from replication.core import Action, AppendFetched, HighWatermarkAdvanced, Truncate

TOPIC = "t"


@dataclass
class _Settings:
    max_fetch_bytes: int = 1 << 24


class _Driver:
    """What ``ReplicationDriver.execute`` does with the actions this test produces."""

    def execute(self, r: PartitionReplica, actions: list[Action], records: Any = b"") -> None:
        for a in actions:
            if isinstance(a, HighWatermarkAdvanced):
                r.on_hw_advanced()
            elif isinstance(a, AppendFetched):
                r.append_fetched(records)
            elif isinstance(a, Truncate):
                r.truncate(a.offset)


@dataclass
class _Node:
    partitions: dict[tuple[str, int], PartitionReplica] = field(default_factory=dict)
    settings: _Settings = field(default_factory=_Settings)
    replication: _Driver = field(default_factory=_Driver)


def _meta(leader: int, leader_epoch: int, isr: tuple[int, ...] = (1, 2)) -> PartitionMeta:
    return PartitionMeta(TOPIC, 0, (1, 2), isr, leader, leader_epoch, leader_epoch)


def _replica(tmp: Path, broker: int, meta: PartitionMeta) -> PartitionReplica:
    log = PartitionLog(tmp / f"b{broker}", LogConfig())
    r = PartitionReplica(TOPIC, "id", meta, TopicConfig(min_insync_replicas=2), log, broker, 0)
    r.broker_epoch = 10 + broker
    r.update_meta(meta, 0)
    return r


def _rec(i: int) -> ProducedRecord:
    return ProducedRecord(None, b'{"value":%d}' % i, 1000 + i, None)


async def _fetch_round(leader_node: _Node, follower: PartitionReplica, wait_ms: int = 0) -> None:
    """One fetch round trip of the follower against the leader's handler."""
    fs = follower.follower_state
    assert fs is not None
    req = fs.build_fetch(follower.log)
    assert req is not None
    body = {
        "replica_id": req.replica_id, "broker_epoch": req.broker_epoch,
        "max_wait_ms": wait_ms, "max_bytes": 1 << 20,
        "partitions": [{"topic": TOPIC, "partition": 0, "fetch_offset": req.fetch_offset,
                        "last_fetched_epoch": req.last_fetched_epoch,
                        "current_leader_epoch": req.current_leader_epoch}],
    }
    [a] = decode_answers(await serve_replica_fetch(leader_node, body))  # type: ignore[arg-type]
    actions = fs.on_fetch_response(req, a.response, follower.log, 0)
    _Driver().execute(follower, actions, a.records)
    if not actions:
        follower.adopt_leader_hw()


async def test_acks_all_waits_until_the_follower_fetched_past_the_batch(tmp_path: Path) -> None:
    leader = _replica(tmp_path, 1, _meta(1, 1))
    follower = _replica(tmp_path, 2, _meta(1, 1))
    node = _Node({(TOPIC, 0): leader})
    _base, last = leader.append([_rec(0), _rec(1)])
    waiter = asyncio.create_task(leader.wait_committed(last, 5))
    await _fetch_round(node, follower)  # ships the batch; HW still 0
    assert follower.log_end_offset == 2 and leader.high_watermark == 0 and not waiter.done()
    await _fetch_round(node, follower)  # reports offset 2: HW = min(ISR) = 2
    assert await waiter and leader.high_watermark == 2
    await _fetch_round(node, follower)  # the follower learns the HW
    assert follower.high_watermark == 2


async def test_parked_fetch_wakes_on_append(tmp_path: Path) -> None:
    leader = _replica(tmp_path, 1, _meta(1, 1))
    follower = _replica(tmp_path, 2, _meta(1, 1))
    node = _Node({(TOPIC, 0): leader})
    round_trip = asyncio.create_task(_fetch_round(node, follower, wait_ms=10_000))
    await asyncio.sleep(0)  # let the fetch park
    assert not round_trip.done()
    leader.append([_rec(0)])
    await asyncio.wait_for(round_trip, 5)
    assert follower.log_end_offset == 1


async def test_deposed_leader_truncates_uncommitted_records_by_leader_epoch(tmp_path: Path) -> None:
    a = _replica(tmp_path, 1, _meta(1, 1))
    b = _replica(tmp_path, 2, _meta(1, 1))
    for i in range(3):
        a.append([_rec(i)])
    await _fetch_round(_Node({(TOPIC, 0): a}), b)  # b has 0..2
    for i in range(100, 103):  # only on a: never committed
        a.append([_rec(i)])
    gone = asyncio.create_task(a.wait_committed(a.log_end_offset - 1, 5))
    await asyncio.sleep(0)
    # The controller elects b at leader epoch 2; a follows it.
    b.update_meta(_meta(2, 2), 0)
    a.update_meta(_meta(2, 2), 0)
    with pytest.raises(PartitionGone):
        await gone  # acks=all on the deposed leader cannot finish there
    for i in range(3, 6):
        b.append([_rec(i)])
    node_b = _Node({(TOPIC, 0): b})
    await _fetch_round(node_b, a)  # diverging epoch (1, 3): truncate to 3
    assert a.log_end_offset == 3
    await _fetch_round(node_b, a)  # fetch b's epoch-2 records
    assert a.log_end_offset == b.log_end_offset == 6
    assert a.log.read(0, 1 << 20) == b.log.read(0, 1 << 20), "logs converged byte for byte"


async def test_fetch_with_stale_leader_epoch_is_fenced(tmp_path: Path) -> None:
    leader = _replica(tmp_path, 1, _meta(1, 3))
    node = _Node({(TOPIC, 0): leader})
    body = {"replica_id": 2, "broker_epoch": 12, "max_wait_ms": 0, "max_bytes": 1024,
            "partitions": [{"topic": TOPIC, "partition": 0, "fetch_offset": 0,
                            "last_fetched_epoch": -1, "current_leader_epoch": 2}]}
    [a] = decode_answers(await serve_replica_fetch(node, body))  # type: ignore[arg-type]
    assert a.response.error == "FENCED_LEADER_EPOCH"
    body["partitions"][0]["topic"] = "other"  # type: ignore[index]
    [a] = decode_answers(await serve_replica_fetch(node, body))  # type: ignore[arg-type]
    assert a.response.error == "NOT_LEADER"


@pytest.mark.parametrize("body", [
    [], {}, {"replica_id": 2, "broker_epoch": 1, "partitions": "x"},
    {"replica_id": 2, "broker_epoch": 1, "partitions": [{"topic": "t"}]},
    {"replica_id": "two", "broker_epoch": 1, "partitions": []},
])
def test_malformed_fetch_requests_are_refused(body: Any) -> None:
    from app.replica.serve import parse_replica_fetch

    with pytest.raises((KeyError, TypeError, ValueError)):
        parse_replica_fetch(body)
