"""Compatibility home of the leader's partition state (``app/partition.py`` imports it here).

The protocol core now lives in small modules: ``leader`` (``LeaderState``,
``ReplicaProgress``), ``follower``, ``messages``, ``actions``, ``pending``,
``rules`` and ``log``.
"""

from __future__ import annotations

from replication.core.leader import LeaderState, ReplicaProgress

__all__ = ["LeaderState", "ReplicaProgress"]
