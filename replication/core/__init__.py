"""Sans-I/O protocol core: partition replication state, no sockets, clocks or tasks.

What a server driver calls, per partition:

* on metadata: ``LeaderState.become_leader(...)`` when this broker leads at a
  newer leader epoch, ``FollowerState.become_follower(...)`` when another broker
  does (or nobody: ``leader=NO_LEADER``), ``state.on_metadata(...)`` for newer
  partition epochs at the same leader epoch;
* leader: ``handle_fetch(req, log, now_ms) -> (FetchResponse, actions)``,
  ``on_local_append(leo)``, ``tick(now_ms)``,
  ``on_alter_partition_result(error=..., isr=..., partition_epoch=...)``,
  ``applied_high_watermark``, ``live_replicas(now_ms)``;
* follower: ``build_fetch(log)``, ``on_fetch_response(req, resp, log, now_ms)``,
  ``on_log_changed(log)``, ``tick(log, now_ms)``.

Outputs are actions (``actions.py``) the driver executes: ``SendAlterPartition``,
``Truncate``, ``AppendFetched``, ``ReportLeaderSuspect``, ``HighWatermarkAdvanced``.
"""

from replication.core.actions import (
    Action,
    AppendFetched,
    HighWatermarkAdvanced,
    ReportLeaderSuspect,
    SendAlterPartition,
    Truncate,
)
from replication.core.follower import NO_LEADER, FollowerState
from replication.core.leader import LeaderState, ReplicaProgress
from replication.core.log import MemoryLog, ReplicaLog
from replication.core.messages import DivergingEpoch, FetchRequest, FetchResponse
from replication.core.pending import PendingExpand, PendingShrink
from replication.core.rules import ALL_ON, ReplicationSettings, SafetyRules

__all__ = [
    "ALL_ON",
    "NO_LEADER",
    "Action",
    "AppendFetched",
    "DivergingEpoch",
    "FetchRequest",
    "FetchResponse",
    "FollowerState",
    "HighWatermarkAdvanced",
    "LeaderState",
    "MemoryLog",
    "PendingExpand",
    "PendingShrink",
    "ReplicaLog",
    "ReplicaProgress",
    "ReplicationSettings",
    "ReportLeaderSuspect",
    "SafetyRules",
    "SendAlterPartition",
    "Truncate",
]
