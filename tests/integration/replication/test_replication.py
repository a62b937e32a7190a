"""Partition replication on real processes: 3 nodes, RF=3, min ISR 2 (issue 4 item 7).

Faults are real: SIGKILL (kill -9), SIGSTOP/SIGCONT, restarts on the same
data directory. Waits poll with deadlines (``eventually``); nothing asserts on
elapsed time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from app.client import Client, TidelogError
from app.storage import LogConfig, PartitionLog, iter_records
from tests.integration.replication.conftest import (
    FAST_ENV,
    active_controller,
    alive,
    create_replicated,
    describe,
    eventually,
    leader_state,
    produce_retrying,
    read_all,
)
from tests.support.node import ClusterProcesses, NodeProcess

FETCH_WAIT_MS = 500  # the default replica_fetch_wait_ms


def _check_acked_survived(acked: list[tuple[int, int]], log: list[tuple[int, Any]]) -> None:
    """Every acknowledged record is at its acknowledged offset, in order (none lost, none
    reordered); retries may add duplicates of records that committed anyway."""
    by_offset = dict(log)
    for offset, value in acked:
        assert by_offset.get(offset) == value, f"acked {value} at {offset} lost: {by_offset.get(offset)}"
    offsets = [o for o, _ in acked]
    assert offsets == sorted(offsets), "acknowledged records reordered"
    assert [o for o, _ in log] == list(range(log[0][0], log[0][0] + len(log))), "gap in the log"


def test_acks_all_records_survive_leader_kill(cluster: ClusterProcesses) -> None:
    [state] = create_replicated(cluster, "survive")
    old = state["leader"]
    acked: list[tuple[int, int]] = []
    for i in range(40):
        acked.append((produce_retrying(lambda: alive(cluster), "survive", 0, i), i))
    cluster.node(old).kill()
    for i in range(40, 80):
        acked.append((produce_retrying(lambda: alive(cluster), "survive", 0, i), i))
    new = eventually(lambda: leader_state(cluster, "survive", 0), what="a new leader")
    assert new["leader"] != old and new["leader_epoch"] > state["leader_epoch"]
    survivor = alive(cluster)[0]
    _check_acked_survived(acked, read_all(survivor, "survive", 0))


def test_killed_follower_restarts_and_rejoins_the_isr(cluster: ClusterProcesses) -> None:
    [state] = create_replicated(cluster, "rejoin")
    leader = cluster.node(state["leader"])
    victim = next(n for n in cluster.nodes if n.node_id != leader.node_id)
    for i in range(20):
        produce_retrying(lambda: [leader], "rejoin", 0, i)
    victim.kill()
    eventually(
        lambda: (s := leader_state(cluster, "rejoin", 0)) and victim.node_id not in s["isr"],
        what="the killed follower out of the ISR",
    )
    for i in range(20, 50):  # min ISR 2 still holds: the leader keeps committing
        produce_retrying(lambda: [leader], "rejoin", 0, i)
    victim.start()

    def rejoined() -> dict[str, Any] | None:
        s = leader_state(cluster, "rejoin", 0)
        if s is None or victim.node_id not in s["isr"]:
            return None
        mine = next(r for r in s["replica_states"] if r["broker"] == victim.node_id)
        return s if mine["log_end_offset"] == s["log_end_offset"] == 50 else None

    s = eventually(rejoined, what="the restarted follower back in the ISR and caught up")
    assert s["high_watermark"] == 50 and not s["under_replicated"]
    kinds = _event_kinds(leader, "rejoin")
    assert "isr_shrink" in kinds and "isr_expand" in kinds, kinds


def _event_kinds(n: NodeProcess, topic: str) -> list[str]:
    import httpx

    r = httpx.get(f"{n.url}/v1/topics/{topic}/partitions/0/events", timeout=5).raise_for_status()
    return [e["kind"] for e in r.json()["events"]]


def test_paused_follower_leaves_the_isr_and_the_leader_keeps_committing(
    cluster: ClusterProcesses,
) -> None:
    [state] = create_replicated(cluster, "slow")
    leader = cluster.node(state["leader"])
    slow = next(n for n in cluster.nodes if n.node_id != leader.node_id)
    slow.pause()
    try:
        # acks=all waits while the paused follower is still in the ISR, then goes on
        # once the leader (or the controller, by fencing) removed it.
        for i in range(30):
            produce_retrying(lambda: [leader], "slow", 0, i)
        s = eventually(
            lambda: (s := leader_state(cluster, "slow", 0)) and slow.node_id not in s["isr"] and s,
            what="the paused follower out of the ISR",
        )
        # A produce that timed out while the follower was still in the ISR was written
        # and is retried (at-least-once), so there may be more than 30 records; all of
        # them are committed without the paused follower.
        assert s["high_watermark"] >= 30 and len(s["isr"]) == 2 and s["under_replicated"]
        assert s["high_watermark"] == s["log_end_offset"]
        assert slow.node_id not in s["lrs"]
    finally:
        slow.resume()
    eventually(
        lambda: (s := leader_state(cluster, "slow", 0)) and slow.node_id in s["isr"],
        what="the resumed follower back in the ISR",
    )


def _read_local_log(n: NodeProcess, topic: str, partition: int) -> list[tuple[int, Any]]:
    """Records of a stopped node's replica, straight from its segment files."""
    plog = PartitionLog(n.data_dir / "logs" / f"{topic}-{partition}", LogConfig())
    try:
        data = plog.read(plog.log_start_offset, 1 << 30)
        return [(off, orjson.loads(bytes(rec))["value"]) for off, _ts, _e, rec in iter_records(data)]
    finally:
        plog.close()


@pytest.fixture
def patient_cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    """Like ``cluster`` but leaders drop no follower for 10 s: a paused follower stays in
    the ISR (and so stays electable) while the test holds it."""
    c = ClusterProcesses(tmp_path, 3, env={**FAST_ENV, "TIDELOG_REPLICA_LAG_TIME_MS": "10000"})
    c.start()
    yield c
    c.kill_all()


def test_deposed_leader_truncates_its_uncommitted_records_and_converges(
    patient_cluster: ClusterProcesses,
) -> None:
    cluster = patient_cluster
    states = create_replicated(cluster, "deposed", partitions=3)
    ctrl = eventually(lambda: active_controller(cluster), what="a controller")
    # A partition not led by the controller's node: pausing its leader keeps the controller up.
    state = next(s for s in states if s["leader"] != ctrl)
    p, old = state["partition"], cluster.node(state["leader"])
    followers = [n for n in cluster.nodes if n is not old]
    for i in range(10):
        produce_retrying(lambda: [old], "deposed", p, i)
    for f in followers:
        f.pause()

    def parked_fetches_answered() -> bool:
        # A fetch parked before the pause would carry the next records to the follower
        # when it resumes; it is answered (empty) once the long-poll wait has passed.
        s = describe(old, "deposed", p)  # the followers are paused: ask the leader only
        return all(r["last_fetch_ms"] is not None and r["last_fetch_ms"] > 2 * FETCH_WAIT_MS
                   for r in s["replica_states"] if r["broker"] != old.node_id)

    eventually(parked_fetches_answered, what="no replica fetch parked on the leader")
    with Client(old.url) as cl:  # written on the leader only: uncommitted
        for i in range(100, 105):
            cl.produce("deposed", [{"value": i}], partition=p, acks="leader")
    old.pause()
    for f in followers:
        f.resume()
    try:
        new = eventually(
            lambda: (s := leader_state(cluster, "deposed", p)) and s["leader"] != old.node_id and s,
            what="a new leader elected among the followers",
        )
        live = [cluster.node(new["leader"])]
        for i in range(10, 20):
            produce_retrying(lambda: live, "deposed", p, i)
    finally:
        old.resume()
    def rejoined() -> dict[str, Any] | None:
        s = leader_state(cluster, "deposed", p)
        if s is None or old.node_id not in s["isr"]:
            return None
        mine = next(r for r in s["replica_states"] if r["broker"] == old.node_id)
        return s if mine["log_end_offset"] == s["log_end_offset"] == 20 else None

    s = eventually(rejoined, what="the deposed leader caught up and back in the ISR")
    committed = read_all(live[0], "deposed", p)
    assert [v for _, v in committed] == list(range(20)), "uncommitted records never committed"
    old.stop()
    assert _read_local_log(old, "deposed", p) == committed, "the deposed leader converged"
    assert s["leader_epoch"] > state["leader_epoch"]


def test_consumers_never_see_the_high_watermark_go_backwards_across_failover(
    cluster: ClusterProcesses,
) -> None:
    [state] = create_replicated(cluster, "mono")
    old = state["leader"]
    watcher = next(n for n in cluster.nodes if n.node_id != old)
    seen: list[int] = []
    stop = threading.Event()

    def consume() -> None:
        with Client(watcher.url, timeout_s=5) as cl:
            while not stop.is_set():
                try:
                    seen.append(cl.fetch("mono", 0, "latest", max_wait_ms=100).high_watermark)
                except Exception:
                    stop.wait(0.02)

    t = threading.Thread(target=consume)
    t.start()
    try:
        for i in range(30):
            produce_retrying(lambda: alive(cluster), "mono", 0, i)
        cluster.node(old).kill()
        for i in range(30, 60):
            produce_retrying(lambda: alive(cluster), "mono", 0, i)
        eventually(lambda: seen and seen[-1] >= 60, what="the consumer to see the new HW")
    finally:
        stop.set()
        t.join()
    assert seen == sorted(seen), f"HW went backwards: {seen}"


def test_not_enough_replicas_when_the_isr_is_below_min_isr(cluster: ClusterProcesses) -> None:
    # min ISR 3 of RF 3: losing one follower is enough (two dead nodes would also take
    # the controller quorum, and with it every ISR change).
    [state] = create_replicated(cluster, "nem", min_isr=3)
    leader = cluster.node(state["leader"])
    with Client(leader.url) as cl:
        cl.produce("nem", [{"value": 0}], partition=0)
    victim = next(n for n in cluster.nodes if n.node_id != leader.node_id)
    victim.kill()
    eventually(
        lambda: (s := leader_state(cluster, "nem", 0)) and len(s["isr"]) == 2,
        what="the ISR down to 2",
    )
    with Client(leader.url) as cl:
        with pytest.raises(TidelogError) as e:
            cl.produce("nem", [{"value": 1}], partition=0)
        assert e.value.code == "NOT_ENOUGH_REPLICAS" and e.value.status == 503
        assert cl.produce("nem", [{"value": 2}], partition=0, acks="leader")[0]["offset"] == 1
    victim.start()
    eventually(
        lambda: (s := leader_state(cluster, "nem", 0)) and len(s["isr"]) == 3,
        what="the ISR back to 3",
    )
    with Client(leader.url) as cl:
        assert cl.produce("nem", [{"value": 3}], partition=0)[0]["offset"] == 2


def test_produce_to_any_node_is_replicated_and_readable_everywhere(
    cluster: ClusterProcesses,
) -> None:
    create_replicated(cluster, "anywhere", partitions=3)
    for n in cluster.nodes:
        with n.client() as cl:
            for p in range(3):
                cl.produce("anywhere", [{"value": f"{n.node_id}-{p}"}], partition=p)
            cl.produce("anywhere", [{"key": f"k{i}", "value": i} for i in range(10)])
    for p in range(3):
        s = eventually(
            lambda p=p: (s := leader_state(cluster, "anywhere", p))
            and all(r["log_end_offset"] == s["log_end_offset"] for r in s["replica_states"])
            and s["high_watermark"] == s["log_end_offset"] and s,
            what="every replica at the leader's LEO",
        )
        for n in cluster.nodes:
            values = [v for _, v in read_all(n, "anywhere", p)]
            assert values[:3] == [f"{m}-{p}" for m in (1, 2, 3)] or len(values) == s["high_watermark"]
            assert len(values) == s["high_watermark"]


def test_a_follower_kill_shrinks_and_its_restart_expands_every_partition_isr(
    cluster: ClusterProcesses,
) -> None:
    """Many partitions change ISR at the same tick; the leaders send them to the controller
    batched (``alter_partitions``), and every one must still be applied, then undone."""
    n = 24
    create_replicated(cluster, "many", partitions=n)
    victim = cluster.node(2)
    victim.kill()

    def isrs() -> list[list[int]] | None:
        states = [leader_state(cluster, "many", p) for p in range(n)]
        return None if any(s is None for s in states) else [sorted(s["isr"]) for s in states if s]

    eventually(lambda: (got := isrs()) and all(2 not in isr for isr in got), timeout_s=60,
               what="node 2 out of every ISR")
    victim.start()
    eventually(lambda: (got := isrs()) and all(len(isr) == 3 for isr in got), timeout_s=60,
               what="node 2 back in every ISR")


def test_describe_through_any_node_sees_an_acknowledged_write_at_once(cluster: ClusterProcesses) -> None:
    """Read-your-writes for metadata: after an acks=all produce, a describe through a node that
    does not lead the partition shows an HW past the write (clients like the Spark source read
    up to it). A cached leader report would lag by its time to live."""
    [state] = create_replicated(cluster, "ryw")
    leader = state["leader"]
    others = [n for n in cluster.nodes if n.node_id != leader]
    for i in range(30):
        via, ask = others[i % 2], others[(i + 1) % 2]
        with Client(via.url) as c:
            off = c.produce("ryw", [{"value": i}], partition=0)[0]["offset"]
        for url in (ask.url, cluster.node(leader).url):
            d = httpx.get(f"{url}/v1/topics/ryw", timeout=5).json()["partitions"][0]
            assert d["high_watermark"] >= off + 1, (i, url, d["high_watermark"], off)
