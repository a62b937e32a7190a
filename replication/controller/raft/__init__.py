"""The controller's replicated metadata log: the only importer of raftos in tidelog.

Importing this package checks that raftos is exactly 0.2.6 (``RaftVersionError``
otherwise) and installs the adapter's patches (``patches``; see
shared/raftos/FINDINGS.md for the defects they fix).

Public interface::

    settings = RaftSettings(node_id=1, raft_addr=("127.0.0.1", 9001),
                            voters={1: ("127.0.0.1", 9001)}, data_dir=Path("data"),
                            secret="cluster secret")
    log = RaftMetadataLog(settings)
    await log.start()                      # one per process; a single voter leads at once
    log.is_leader, log.leader_id           # leader tracking (polled, see adapter)
    log.add_leader_listener(cb)            # cb(leader_id: int | None, we_lead: bool)
    index = await log.propose({"k": v, "gone": None}, request_id="r-1")
        # returns once applied locally; NotLeaderError(leader_id): nothing appended;
        # ProposalTimeout/LeadershipLost: outcome unknown -> log.request_applied_index("r-1");
        # CommandTooLarge: one key's value alone exceeds the encrypted datagram cap
    await log.barrier()                    # no-op commit before serving reads on the leader
    log.state()                            # Mapping of applied keys (deleted keys absent)
    log.add_apply_listener(cb)             # cb(index, updates) per applied change set, in order
    await log.stop()

Values must be JSON-serialisable (tuples come back as lists). Files live in
``data_dir/raft/`` (meta.json, log.jsonl, snapshot.json, LOCK).

Bounding the log (FINDINGS 13; Raft §7). Every ``max_log_entries`` applied entries a node
writes its whole applied state (plus the request-id table and any half-received split
change set) as one fsynced snapshot at the last applied index, then drops the log prefix
except the newest ``max_log_entries // 2`` covered entries. Restart loads the snapshot and
at most ~1.5 x ``max_log_entries`` entries, so its cost follows the state size, not the
cluster's age (``bench/raft_replay.py``). A follower behind the leader's log base
receives the snapshot over raft's own encrypted UDP channel, in datagram-sized chunks,
stop-and-wait, with the usual term checks (``install_snapshot``): it needs no second
transport, no HTTP endpoint or credentials outside this package, and a follower only a
little behind still catches up by AppendEntries thanks to the retained entries. The cost
is throughput (one ~44 KB chunk per round trip), fine for metadata of a few MB.

Not supported: membership changes (the voter set is fixed), pre-vote, leader leases
(reads go through ``barrier``), observers running raft (they learn metadata over HTTP).
"""

from . import patches as _patches

_patches.install()

from .adapter import RaftMetadataLog, RaftSettings  # noqa: E402
from .errors import (  # noqa: E402
    CommandTooLarge,
    LeadershipLost,
    NotLeaderError,
    ProposalTimeout,
    RaftError,
    RaftVersionError,
)

__all__ = [
    "CommandTooLarge",
    "LeadershipLost",
    "NotLeaderError",
    "ProposalTimeout",
    "RaftError",
    "RaftMetadataLog",
    "RaftSettings",
    "RaftVersionError",
]
