"""Three raft nodes as real processes on 127.0.0.1 UDP (repros r03, r05c, r06, r09).

Waits poll with deadlines; nothing asserts on elapsed wall-clock time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from raft_cluster import RaftCluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RaftCluster]:
    c = RaftCluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()


def test_three_nodes_elect_replicate_and_fail_over(cluster: RaftCluster) -> None:
    """Leader election, forwarding hint, replication, kill -9 of the leader (FINDINGS 3:
    the new leader commits), restart of the old leader (FINDINGS 12: votes survive)."""
    cluster.start()
    cluster.wait_leader()
    for i in range(20):
        cluster.propose({f"topic-{i % 4}": {"partitions": i}, "deleted": None}, f"req-{i}")
    assert_follower_names_the_leader(cluster)
    expected = {f"topic-{i}": {"partitions": 16 + i} for i in range(4)}
    assert cluster.wait_converged() == expected

    leader = cluster.wait_leader()
    cluster.kill(leader)
    new_leader = cluster.wait_leader(exclude=(leader,))
    assert cluster.nodes[new_leader].call("barrier")["ok"]
    assert cluster.nodes[new_leader].call("state")["state"] == expected
    cluster.propose({"after-failover": True})
    cluster.start(leader)
    expected["after-failover"] = True
    assert cluster.wait_converged() == expected
    assert_follower_names_the_leader(cluster)


def assert_follower_names_the_leader(cluster: RaftCluster, deadline_s: float = 30.0) -> None:
    """A follower refuses a write and names the leader (for forwarding). Retried, because
    a load spike can cause an election between the two calls."""
    end = time.monotonic() + deadline_s
    while True:
        leader = cluster.wait_leader()
        follower = next(i for i in cluster.nodes if i != leader)
        reply = cluster.nodes[follower].call("propose", updates={"x": 1})
        assert reply["ok"] is False and reply["error"] == "NotLeaderError"
        if reply["leader_id"] == leader:
            return
        assert time.monotonic() < end, reply
        time.sleep(0.1)


def test_empty_follower_catches_up_past_the_compacted_log(cluster: RaftCluster) -> None:
    """FINDINGS 7 (lagging follower never caught up, r05c) and 13 (no snapshots): node 3
    starts empty after the others compacted their logs; it must converge by snapshot."""
    cluster.extra = ["--max-log-entries", "50"]
    cluster.start(1, 2)
    cluster.propose_many(400, keys=40)
    leader = cluster.wait_leader()
    status = cluster.nodes[leader].call("status")
    assert status["log_base_index"] >= 300 and status["log_entries"] <= 76
    cluster.start(3)
    state = cluster.wait_converged(deadline_s=60)
    assert state["seq"] == 399 and len(state) == 41
    node3 = cluster.nodes[3].call("status")
    assert node3["snapshots_installed"] >= 1 and node3["log_entries"] <= 76


def test_quorum_loss_fails_the_write_and_a_full_restart_recovers(cluster: RaftCluster) -> None:
    """FINDINGS 10 (r09b: a write in flight when the leader lost quorum hung forever) and
    FINDINGS 3 (r09a: after a full restart nothing committed again)."""
    cluster.extra = ["--request-timeout", "2", "--heartbeat", "0.3"]
    cluster.start()
    cluster.wait_leader()
    cluster.propose({"before": 1})
    leader = cluster.wait_leader()
    for i in cluster.ids:
        if i != leader:
            cluster.kill(i)
    reply = cluster.nodes[leader].call("propose", updates={"k": "lost?"}, request_id="maybe")
    # LeadershipLost once the step-down timer fires (1.5 s), else ProposalTimeout (2 s);
    # either way the caller gets an answer instead of hanging (0.2.6 never answered).
    assert reply["error"] in ("ProposalTimeout", "LeadershipLost"), reply
    for i in list(cluster.nodes):
        cluster.kill(i)
    cluster.start()
    new_leader = cluster.wait_leader()
    assert cluster.nodes[new_leader].call("barrier")["ok"]
    # outcome unknown: read back by request id, then retry with the same id (idempotent)
    cluster.propose({"k": "lost?"}, request_id="maybe")
    state = cluster.wait_converged()
    assert state == {"before": 1, "k": "lost?"}
    indexes = {n.call("request_index", request_id="maybe")["index"] for n in cluster.nodes.values()}
    assert len(indexes) == 1 and None not in indexes  # applied once, at one index


def test_large_change_sets_are_split_and_oversize_values_refused(cluster: RaftCluster) -> None:
    """FINDINGS 9 (r06): an oversize datagram hung the caller and cost an election."""
    cluster.start()
    leader = cluster.wait_leader()
    big = {f"p{i:04d}": "z" * 2_000 for i in range(150)}  # ~300 KB: several datagrams
    cluster.propose(big)
    reply = cluster.nodes[leader].call("propose", updates={"huge": "x" * 70_000})
    assert reply["error"] == "CommandTooLarge"  # refused before anything was appended
    assert cluster.wait_converged() == big


@pytest.mark.slow
def test_unpatched_b1_never_commits_after_full_restart(cluster: RaftCluster) -> None:
    """Negative twin of the restart above, on real processes: without B1 the new leader
    never commits its no-op, so it never becomes ready (r09a)."""
    cluster.start()
    cluster.wait_leader()
    cluster.propose({"k": 1})
    cluster.stop()
    cluster.extra = ["--without", "B1"]
    cluster.start()
    end = time.monotonic() + 8
    while time.monotonic() < end:
        statuses = cluster.statuses()
        assert not any(s["is_leader"] for s in statuses.values())
        time.sleep(0.2)
    assert any(s["role"] == "leader" for s in cluster.statuses().values())
