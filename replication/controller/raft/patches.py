"""Version check and the named patches this adapter applies to raftos 0.2.6.

Every patch is a set of attribute replacements recorded with its original, so a test can
take exactly one out (``without("B2")``) and show the defect it fixes come back. Names
follow shared/raftos/FINDINGS.md (F1-F4 Python 3.11; B1-B4, V1, M1 its patch names) plus
the adapter's own:

  STORE  durable storage classes: JSON log with a snapshot base, atomic fsynced term/vote,
         in-memory state machine (FINDINGS 1, 12, 13, Medium: per-key file rewrite, deletes)
  SNAP   InstallSnapshot in datagram-sized chunks (Raft §7; FINDINGS 13)
  W6     one future per entry; leader pins its term and appends a no-op (FINDINGS 3, 6, 11)
  HB     leader step-down by recent acknowledgements, single voter stays leader
  V2     RequestVote answers refusals and resets the election timer when granting
  C1     votes are counted once per voter and only for the current term
  N1     undecryptable/unknown datagrams are dropped, handler errors logged
  F5     (FINDINGS 8) the key comes from the cluster secret: ``configure_crypto``
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from .errors import RaftVersionError

REQUIRED_RAFTOS_VERSION = "0.2.6"

_MISSING = object()


def check_version() -> None:
    """Refuse to run on any raftos but 0.2.6: every patch below edits its private internals."""
    try:
        found = metadata.version("raftos")
    except metadata.PackageNotFoundError:
        raise RaftVersionError(
            "raftos is not installed; run `bash scripts/bootstrap` (it installs "
            f"raftos=={REQUIRED_RAFTOS_VERSION} with --no-deps)"
        ) from None
    if found != REQUIRED_RAFTOS_VERSION:
        raise RaftVersionError(
            f"tidelog's raft adapter patches raftos=={REQUIRED_RAFTOS_VERSION}, found {found}; "
            "the patches must be reviewed before changing the version"
        )
    from raftos import cryptors

    if not cryptors.crypto_enabled:
        # raftos silently falls back to plaintext UDP when cryptography fails to import.
        raise RaftVersionError("the cryptography package does not import: raft would be unencrypted")


@dataclass
class Patch:
    """One named fix: attribute replacements plus what they replaced."""

    name: str
    why: str
    edits: list[tuple[Any, str, Any]]
    originals: list[Any] = field(default_factory=list)
    applied: bool = False

    def apply(self) -> None:
        if self.applied:
            return
        self.originals = [getattr(t, a, _MISSING) for t, a, _ in self.edits]
        for target, attr, value in self.edits:
            setattr(target, attr, value)
        self.applied = True

    def revert(self) -> None:
        if not self.applied:
            return
        for (target, attr, _), original in zip(self.edits, self.originals, strict=True):
            if original is _MISSING:
                delattr(target, attr)
            else:
                setattr(target, attr, original)
        self.applied = False


def _atomic_method(func: Callable[..., Any]) -> Callable[..., Any]:
    """F4: ``with await lock`` is gone since Python 3.9; use ``async with``."""

    @functools.wraps(func)
    async def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        async with self.lock:
            return await func(self, *args, **kwargs)

    return wrapped


def _msgpack_unpack(data: bytes) -> Any:
    """F3: msgpack >= 1.0 has no ``encoding=``; ``raw=False`` decodes str the same way."""
    import msgpack

    return msgpack.unpackb(data, use_list=True, raw=False, strict_map_key=False)


def _build() -> dict[str, Patch]:
    from raftos import network, replicator, serializers, server
    from raftos import state as rs

    from . import protocol as p

    vt = rs.validate_term
    replicated_dict = replicator.ReplicatedDict
    replicated_list = replicator.ReplicatedList
    patches = [
        Patch("F1", "Queue(loop=) TypeError on 3.10+", [(server.Node, "__init__", p.node_init)]),
        Patch(
            "F2",
            "asyncio.futures.InvalidStateError is gone on 3.11",
            [(asyncio.futures, "InvalidStateError", asyncio.InvalidStateError)],
        ),
        Patch(
            "F3",
            "msgpack>=1.0 rejects unpackb(encoding=)",
            [(serializers.MessagePackSerializer, "unpack", staticmethod(_msgpack_unpack))],
        ),
        Patch(
            "F4",
            "`with await lock` raises on 3.9+",
            [
                (cls, name, _atomic_method(getattr(cls, name).__wrapped__))
                for cls, names in (
                    (replicated_dict, ("update", "pop", "delete")),
                    (replicated_list, ("append", "extend")),
                )
                for name in names
            ],
        ),
        Patch(
            "STORE",
            "FINDINGS 1, 12, 13: durable JSON log with snapshot base, atomic term/vote",
            [
                (rs.State, "__init__", p.state_init),
                (rs.State, "request_handler", p.request_handler),
            ],
        ),
        Patch("M1", "FINDINGS 5: majority of 4 is 3", [(rs.State, "is_majority", p.is_majority)]),
        Patch(
            "V1",
            "FINDINGS 4: keep votedFor",
            [(rs.Follower, "init_storage", p.follower_init_storage)],
        ),
        Patch(
            "V2",
            "RequestVote answers refusals, resets the election timer on a grant",
            [(rs.Follower, "on_receive_request_vote", vt(p.follower_on_receive_request_vote))],
        ),
        Patch(
            "B2",
            "FINDINGS 2: no truncation on stale AppendEntries",
            [
                (
                    rs.Follower,
                    "on_receive_append_entries",
                    p.with_apply(vt(p.follower_on_receive_append_entries)),
                )
            ],
        ),
        Patch(
            "B1",
            "FINDINGS 3: commit after a leader change",
            [(rs.Leader, "update_commit_index", p.leader_update_commit_index)],
        ),
        Patch(
            "B3",
            "match_index only moves forward; ignore replies from other terms",
            [
                (
                    rs.Leader,
                    "on_receive_append_entries_response",
                    p.with_apply(vt(p.leader_on_receive_append_entries_response)),
                )
            ],
        ),
        Patch(
            "B4",
            "FINDINGS 7: one AppendEntries in flight per follower",
            [(rs.Leader, "append_entries", p.leader_append_entries)],
        ),
        Patch(
            "W6",
            "FINDINGS 3, 6, 10, 11: per-entry futures, pinned term, no-op on election",
            [
                (rs.Leader, "start", p.leader_start),
                (rs.Leader, "stop", p.leader_stop),
                (rs.Leader, "append_command", p.leader_append_command),
                (rs.Leader, "execute_command", p.leader_execute_command),
            ],
        ),
        Patch(
            "HB",
            "step down without a recent majority; single voter stays",
            [(rs.Leader, "heartbeat", p.leader_heartbeat)],
        ),
        Patch(
            "C1",
            "one vote per voter, current term only",
            [
                (rs.Candidate, "start", p.candidate_start),
                (
                    rs.Candidate,
                    "on_receive_request_vote_response",
                    vt(p.candidate_on_receive_request_vote_response),
                ),
            ],
        ),
        Patch(
            "SNAP",
            "FINDINGS 13: InstallSnapshot (Raft §7)",
            [
                (rs.BaseState, "on_receive_install_snapshot", vt(p.ignore_message)),
                (rs.BaseState, "on_receive_install_snapshot_response", vt(p.ignore_message)),
                (
                    rs.Candidate,
                    "on_receive_install_snapshot",
                    vt(p.candidate_on_receive_install_snapshot),
                ),
                (
                    rs.Follower,
                    "on_receive_install_snapshot",
                    p.with_apply(vt(p.follower_on_receive_install_snapshot)),
                ),
                (
                    rs.Leader,
                    "on_receive_install_snapshot_response",
                    p.with_apply(vt(p.leader_on_receive_install_snapshot_response)),
                ),
            ],
        ),
        Patch(
            "N1",
            "drop bad datagrams; clean shutdown",
            [
                (network.UDPProtocol, "datagram_received", p.protocol_datagram_received),
                (network.UDPProtocol, "connection_made", p.protocol_connection_made),
                (network.UDPProtocol, "connection_lost", p.protocol_connection_lost),
                (server.Node, "start", p.node_start),
                (server.Node, "stop", p.node_stop),
            ],
        ),
    ]
    return {patch.name: patch for patch in patches}


_PATCHES: dict[str, Patch] = {}


def install() -> None:
    """Check the version, then apply every patch, once per process.

    Later calls do nothing, so a patch a test took out with ``without`` stays out for the
    duration of that ``with`` block even if the code under test calls ``install`` again.
    """
    if _PATCHES:
        return
    check_version()
    _PATCHES.update(_build())
    for patch in _PATCHES.values():
        patch.apply()


def names() -> list[str]:
    """Names of all patches, in application order."""
    return list(_PATCHES)


@contextlib.contextmanager
def without(*names: str) -> Iterator[None]:
    """Temporarily revert the named patches (negative tests: the defect must come back)."""
    unknown = set(names) - set(_PATCHES)
    if unknown:
        raise KeyError(f"unknown raft patches: {sorted(unknown)}")
    for name in names:
        _PATCHES[name].revert()
    try:
        yield
    finally:
        for name in names:
            _PATCHES[name].apply()


def configure(*, log_path: str, heartbeat_interval_s: float, secret: str) -> None:
    """Set raftos's global config: JSON wire format, our log dir, our key (F5/FINDINGS 8).

    raftos instantiates its cryptor at import with the sample key and only rebuilds it when
    ``configure`` receives a class, so passing ``secret_key`` alone silently changed
    nothing. We hand it a ready ``SecretCryptor`` instance built from the cluster secret.
    """
    import raftos

    from .codec import JsonWireSerializer, SecretCryptor

    raftos.configure(
        {
            "log_path": log_path,
            "serializer": JsonWireSerializer,
            "heartbeat_interval": heartbeat_interval_s,
            "cryptor": SecretCryptor(secret),
        }
    )
