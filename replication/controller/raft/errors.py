"""Exceptions raised by the raft adapter; the controller maps them to HTTP answers."""

from __future__ import annotations


class RaftError(Exception):
    """Base class of every error the adapter raises."""


class NotLeaderError(RaftError):
    """This node does not lead; ``leader_id`` is the tidelog id of the leader we know, or None.

    The outcome is known: nothing was appended to the log, so the caller may retry elsewhere.
    """

    def __init__(self, leader_id: int | None) -> None:
        super().__init__(f"not the raft leader (leader: {leader_id})")
        self.leader_id = leader_id


class ProposalTimeout(RaftError):
    """The proposal did not apply in time. Its outcome is unknown: it may still commit.

    Read back by request id (``RaftMetadataLog.applied_index``) before retrying with the same id.
    """


class LeadershipLost(ProposalTimeout):
    """We stopped leading while a proposal was in flight; outcome unknown, as for a timeout."""

    def __init__(self, leader_id: int | None) -> None:
        super().__init__(f"lost raft leadership while proposing (leader: {leader_id})")
        self.leader_id = leader_id


class CommandTooLarge(RaftError):
    """One key's update alone does not fit in a UDP datagram after encryption (FINDINGS 9)."""


class RaftVersionError(RaftError, ImportError):
    """The installed raftos is not the exact release these patches were written against."""


class StorageCorrupt(RaftError):
    """A raft state file is unreadable in a way a crash cannot explain; refuse to start."""
