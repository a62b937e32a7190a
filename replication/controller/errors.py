"""Errors the controller state machine answers with.

Codes are the stable upper-case codes of the public API (API.md); the HTTP
layer maps them to statuses, so this module stays free of any web concern.
"""

from __future__ import annotations


class ControllerError(Exception):
    """A command was refused; ``code`` is stable and machine-readable."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


# Stable codes. The HTTP layer maps them to statuses; brokers branch on them.
INVALID_REQUEST = "INVALID_REQUEST"
"""Malformed or self-contradictory command (ISR not within replicas, ...)."""
TOPIC_NOT_FOUND = "TOPIC_NOT_FOUND"
PARTITION_NOT_FOUND = "PARTITION_NOT_FOUND"
BROKER_NOT_REGISTERED = "BROKER_NOT_REGISTERED"
"""The broker id is unknown: it must register first."""
STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"
"""The sender's broker epoch is not its current one: a newer registration superseded it."""
BROKER_FENCED = "BROKER_FENCED"
"""The sender is fenced; it must heartbeat (same epoch) to be unfenced first."""
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
"""The request's leader epoch is older than the controller's: refresh metadata."""
UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
"""The request's leader epoch is newer than the controller's (cannot happen with one
active controller; answered rather than trusted)."""
NOT_LEADER = "NOT_LEADER"
"""The sender is not the partition's current leader."""
INVALID_PARTITION_EPOCH = "INVALID_PARTITION_EPOCH"
"""AlterPartition was based on another partition epoch (seed 001 §6.3 rule 4)."""
INELIGIBLE_REPLICA = "INELIGIBLE_REPLICA"
"""An added ISR member is fenced, unknown, or named with a stale broker epoch
(seed 001 §6.5.1 case 3)."""
ENTITY_EXISTS = "ENTITY_EXISTS"
"""A create-only entity write found the name taken."""
ENTITY_NOT_FOUND = "ENTITY_NOT_FOUND"
"""An update-only entity write (or a delete) found no entity of that name."""
