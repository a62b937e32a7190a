"""Opens the raftos-backed metadata log (the adapter in replication.controller.raft)."""

from __future__ import annotations

from app.cluster.config import Voter
from app.cluster.metadata_log import MetadataLog
from app.settings import Settings


def open_raft_log(settings: Settings, voters: dict[int, Voter]) -> MetadataLog:
    from replication.controller.raft import RaftMetadataLog, RaftSettings

    me = voters[settings.node_id]
    return RaftMetadataLog(
        RaftSettings(
            node_id=settings.node_id,
            raft_addr=(me.raft_host, me.raft_port),
            voters={v.node_id: (v.raft_host, v.raft_port) for v in voters.values()},
            data_dir=settings.data_dir / "raft",
            secret=settings.cluster_secret,
        )
    )
