"""Replacement methods for raftos's role classes (``raftos.state``), installed by ``patches``.

Each function names the FINDINGS item and the Raft paper section (Ongaro & Ousterhout,
"In Search of an Understandable Consensus Algorithm", extended version) it implements.
They read per-process settings from ``RUNTIME`` because raftos itself keeps its state in
class attributes and one global ``config`` (one raft node per process).

raftos's ``validate_term`` decorator is reused: it bumps the term and demotes a leader or
candidate, *then still calls the handler on the old role object*. Every handler here starts
by checking it is still the active role, because an unguarded old leader would send
AppendEntries in the new term (two leaders in one term).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from raftos import state as rs
from raftos.conf import config

from .codec import SizeBudget
from .errors import LeadershipLost, NotLeaderError
from .machine import NOOP, KeyValueMachine
from .storage import CompactingLog, DurableTermStore, SnapshotStore

logger = logging.getLogger(__name__)

#: AppendEntries carries at most this many entries (and only as many as fit the datagram).
MAX_BATCH_ENTRIES = 256


class Runtime:
    """Process-wide settings and hooks for the patched raftos classes."""

    def __init__(self) -> None:
        self.budget = SizeBudget()
        #: compact once this many applied entries sit above the snapshot; None disables it
        self.max_log_entries: int | None = 1000
        #: raftos ids ("host:port") allowed to talk to us; empty means accept anyone (tests)
        self.peers: set[str] = set()
        self.dropped_datagrams = 0
        self.snapshots_taken = 0
        self.snapshots_installed = 0
        self.role_listeners: list[Callable[[], None]] = []

    def notify_role(self) -> None:
        for cb in list(self.role_listeners):
            try:
                cb()
            except Exception:
                logger.exception("raft role listener failed")


RUNTIME = Runtime()


def fail_waiters(state: Any) -> None:
    """Fail every pending proposal of ``state``: its outcome is unknown now (FINDINGS 10)."""
    waiters, state.waiters = state.waiters, {}
    for _, fut in waiters.values():
        if not fut.done():
            fut.set_exception(LeadershipLost(None))


_TASKS: set[asyncio.Future[Any]] = set()


def _spawn(awaitable: Any) -> None:
    """``ensure_future`` that keeps a reference until done (asyncio holds only weak ones)."""
    task = asyncio.ensure_future(awaitable)
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)


# --------------------------------------------------------------------------- State ----------
def state_init(self: Any, server: Any) -> None:
    """``State.__init__`` on durable storage (FINDINGS 1, 12, 13; Raft §5.2, §7).

    Loads the snapshot first: the log's base must match it, and the state machine resumes
    from it, so a restart replays at most ``max_log_entries`` entries plus the uncommitted
    tail instead of the whole history.
    """
    self.server = server
    self.id = self._get_id(server.host, server.port)
    self.__class__.loop = server.loop
    directory = Path(config.log_path)
    directory.mkdir(parents=True, exist_ok=True)
    self.snapshots = SnapshotStore(directory)
    snap = self.snapshots.load()
    self.storage = DurableTermStore(directory)
    self.log = CompactingLog(directory, snap["index"] if snap else 0, snap["term"] if snap else 0)
    self.state_machine = KeyValueMachine()
    if snap is not None:
        self.state_machine.load_snapshot(snap)
    self.snapshot_rx = None
    #: index -> (term, future) for proposals waiting to be applied (FINDINGS 6)
    self.waiters = {}
    #: loop time of the last message from a leader (leader tracking)
    self.last_leader_contact = 0.0
    self.state = rs.Follower(self)


def is_majority(self: Any, count: int) -> bool:
    """M1 (FINDINGS 5): a strict majority of all voters, ``cluster_count`` peers + self.

    raftos used ``count > peers // 2``: 2 of 4 counted as a majority, so two leaders could
    win one term. Raft §5.2 needs more than half of the whole cluster.
    """
    return 2 * count > self.server.cluster_count + 1


def request_handler(self: Any, data: dict[str, Any]) -> None:
    """Dispatch a message; unknown types are dropped instead of raising in the UDP callback."""
    handler = getattr(self.state, "on_receive_{}".format(data.get("type")), None)
    if handler is None:
        RUNTIME.dropped_datagrams += 1
        return
    handler(data)


# ------------------------------------------------------------------------- applying ----------
def apply_committed(role: Any) -> None:
    """Apply every committed, unapplied entry in order, then compact if due.

    Replaces raftos's ``validate_commit_index``, which applied *before* handling the message
    (one message late) and resolved a single shared future (FINDINGS 6). Here each applied
    index resolves its own waiter; a waiter whose entry was replaced by another leader's
    (different term at that index) fails as lost.
    """
    log, machine = role.log, role.state_machine
    while log.last_applied < log.commit_index:
        index = log.last_applied + 1
        entry = log[index]
        machine.apply(entry["command"], int(entry["term"]))
        log.last_applied = index
        if machine.applied_index != index:
            raise AssertionError(f"state machine at {machine.applied_index}, log at {index}")
        waiter = role.state.waiters.pop(index, None)
        if waiter is not None and not waiter[1].done():
            if waiter[0] == entry["term"]:
                waiter[1].set_result(index)
            else:
                waiter[1].set_exception(LeadershipLost(None))
    maybe_compact(role)


def maybe_compact(role: Any) -> None:
    """Snapshot the applied state and drop the log prefix it covers (FINDINGS 13, Raft §7).

    Order matters for crash safety: the snapshot is durable before the log forgets the
    entries; a crash in between leaves a log whose base is behind the snapshot, which
    ``CompactingLog`` repairs at load.
    """
    limit = RUNTIME.max_log_entries
    log, snapshots = role.log, role.state.snapshots
    if limit is None or log.last_applied - snapshots.index < limit:
        return
    snap = role.state_machine.to_snapshot()
    snapshots.save(snap)
    # Keep the newest half of the entries the snapshot covers: a follower a little behind
    # (a lost datagram, a slow disk) catches up with AppendEntries; only one that is more
    # than that behind needs the whole snapshot. The log holds <= 1.5 x limit entries.
    cut = snap["index"] - limit // 2
    if cut > log.base_index:
        log.compact_to(cut, log.term_at(cut))
    RUNTIME.snapshots_taken += 1


def with_apply(
    func: Callable[[Any, dict[str, Any]], None],
) -> Callable[[Any, dict[str, Any]], None]:
    """Run the handler, then apply whatever it committed."""

    @functools.wraps(func)
    def wrapped(self: Any, data: dict[str, Any]) -> None:
        func(self, data)
        apply_committed(self)  # log and state machine are shared by all role objects

    return wrapped


def _reply(role: Any, data: dict[str, Any], **fields: Any) -> None:
    message = {"type": "{}_response".format(data["type"]), "term": role.storage.term}
    message["request_id"] = data.get("request_id")
    message.update(fields)
    _spawn(role.state.send(message, data["sender"]))


def _saw_leader(role: Any, leader_id: str) -> None:
    role.state.set_leader(leader_id)
    role.state.last_leader_contact = role.loop.time()
    role.election_timer.reset()


# ------------------------------------------------------------------------- follower ----------
def follower_init_storage(self: Any) -> None:
    """V1 (FINDINGS 4): keep ``voted_for`` across restarts and step-downs (Raft §5.2).

    raftos reset it to None on every return to follower, so a voter that restarted
    between two RequestVotes of one term voted twice: two leaders in that term. The vote
    is cleared only when the term rises (``DurableTermStore.update``).
    """
    if not self.storage.exists("term"):
        self.storage.update({"term": 0, "voted_for": None})


def follower_on_receive_request_vote(self: Any, data: dict[str, Any]) -> None:
    """RequestVote receiver (Raft §5.2, §5.4.1), answering refusals too.

    Grants when we have not voted in this term, or voted for this very candidate (a
    retransmitted request), and its log is at least as up to date as ours. Granting resets
    the election timer (Figure 2, Followers).
    """
    voted_for = self.storage.voted_for
    candidate = data["candidate_id"]
    if data["last_log_term"] != self.log.last_log_term:
        up_to_date = data["last_log_term"] > self.log.last_log_term
    else:
        up_to_date = data["last_log_index"] >= self.log.last_log_index
    granted = voted_for in (None, candidate) and up_to_date and data["term"] == self.storage.term
    if granted and voted_for is None:
        self.storage.update({"voted_for": candidate})
    if granted:
        self.election_timer.reset()
    _spawn(
        self.state.send(
            {"type": "request_vote_response", "term": self.storage.term, "vote_granted": granted},
            data["sender"],
        )
    )


def follower_on_receive_append_entries(self: Any, data: dict[str, Any]) -> None:
    """AppendEntries receiver, Raft §5.3 rules 1-5 (B2, FINDINGS 2).

    raftos erased the log from ``prev_log_index + 1`` whenever the message was not exactly
    the next one, so a delayed duplicate heartbeat deleted acknowledged, committed entries.
    Here an entry is removed only on a real term conflict, existing matching entries are
    kept, and the reply reports ``prev_log_index + len(entries)`` (what this message
    proves), never the whole log length. Entries at or below our snapshot base are
    committed and identical by the Log Matching property, so they are skipped.
    """
    _saw_leader(self, data["leader_id"])
    log = self.log
    prev = int(data["prev_log_index"])
    entries: list[dict[str, Any]] = data["entries"]
    if prev < log.base_index:
        skip = min(log.base_index - prev, len(entries))
        entries = entries[skip:]
        prev += skip
        if prev < log.base_index:
            # Everything in the message is already in our snapshot. Entries up to our base
            # are committed, hence identical on every server: report the base as matched.
            _reply(self, data, success=True, last_log_index=log.base_index)
            return
    elif prev > log.last_log_index or log.term_at(prev) != data["prev_log_term"]:
        hint = min(log.last_log_index, prev - 1)
        _reply(self, data, success=False, last_log_index=hint)
        return
    new: list[dict[str, Any]] = []
    for offset, entry in enumerate(entries):
        index = prev + 1 + offset
        if not new and index <= log.last_log_index:
            if log.term_at(index) == entry["term"]:
                continue  # duplicate: keep, do not rewrite
            log.erase_from(index)  # a real conflict (asserts it is not committed)
        new.append({"term": entry["term"], "command": entry["command"]})
    log.append_many(new)
    match = prev + len(entries)
    if data["commit_index"] > log.commit_index:
        log.commit_index = max(log.commit_index, min(int(data["commit_index"]), match))
    _reply(self, data, success=True, last_log_index=match)


def follower_on_receive_install_snapshot(self: Any, data: dict[str, Any]) -> None:
    """InstallSnapshot receiver (Raft §7, Figure 13), in datagram-sized chunks.

    A follower behind the leader's compacted prefix cannot be sent entries any more; it
    receives the snapshot in order (stop-and-wait, the reply names the next offset it
    wants), then keeps any log suffix that follows the snapshot's last entry (rule 6).
    """
    _saw_leader(self, data["leader_id"])
    index, term = int(data["last_index"]), int(data["last_term"])
    if index <= self.log.commit_index:
        _reply(self, data, done=True, last_index=index, next_offset=data["total"])
        return
    rx = self.state.snapshot_rx
    if data["offset"] == 0 or rx is None or (rx["index"], rx["term"]) != (index, term):
        rx = self.state.snapshot_rx = {"index": index, "term": term, "data": bytearray()}
    if data["offset"] == len(rx["data"]):
        rx["data"] += base64.b64decode(data["data"])
    if len(rx["data"]) < data["total"]:
        _reply(self, data, done=False, last_index=index, next_offset=len(rx["data"]))
        return
    blob = bytes(rx["data"])
    self.state.snapshot_rx = None
    snap = json.loads(blob)
    if (int(snap["index"]), int(snap["term"])) != (index, term):
        raise AssertionError("snapshot content does not match its announced index/term")
    self.state.snapshots.save_blob(blob, index, term)
    self.log.compact_to(index, term)
    self.log.commit_index = max(self.log.commit_index, index)
    self.log.last_applied = index
    self.state_machine.load_snapshot(snap, notify=True)
    RUNTIME.snapshots_installed += 1
    _reply(self, data, done=True, last_index=index, next_offset=len(blob))


# ------------------------------------------------------------------------ candidate ----------
def candidate_start(self: Any) -> None:
    """Start an election (Raft §5.2); a single-voter cluster wins at once.

    raftos only counted votes on replies, so with no peers nobody ever became leader.
    """
    self.storage.update({"term": self.storage.term + 1, "voted_for": self.id})
    self.votes = {self.id}
    self.vote_count = 1
    self.request_vote()
    self.election_timer.start()
    if self.state.is_majority(1):
        self.loop.call_soon(_win_if_current, self)


def _win_if_current(candidate: Any) -> None:
    if candidate.state.state is candidate:
        candidate.state.to_leader()


def candidate_on_receive_request_vote_response(self: Any, data: dict[str, Any]) -> None:
    """C1 (found while porting; not in FINDINGS): count a vote only for *this* term, once.

    raftos's ``validate_term`` lets responses with an older term through, and raftos adds 1
    per granted reply, so a delayed grant from an earlier candidacy, or a duplicated
    datagram, could make a minority look like a majority (Raft §5.2: one vote per term).
    """
    if self.state.state is not self or data.get("term") != self.storage.term:
        return
    if data.get("vote_granted"):
        self.votes.add(self.state.get_sender_id(data["sender"]))
        self.vote_count = len(self.votes)
        if self.state.is_majority(self.vote_count):
            self.state.to_leader()


def candidate_on_receive_install_snapshot(self: Any, data: dict[str, Any]) -> None:
    """A leader of our term exists: step down, as raftos does for AppendEntries."""
    if self.storage.term == data["term"]:
        self.state.to_follower()


def ignore_message(self: Any, data: dict[str, Any]) -> None:
    """Roles that have nothing to do with a message (after ``validate_term``)."""


# --------------------------------------------------------------------------- leader ----------
def leader_start(self: Any) -> None:
    """Become leader: pin the term, append a no-op of this term (Raft §8, FINDINGS 3, 11).

    The no-op lets the leader commit (and so apply) everything earlier — Raft §5.4.2 forbids
    counting replicas for older-term entries — and marks when the leader's state is
    current: ``noop_index`` applied means reads are safe.
    """
    self.term = self.storage.term
    self.inflight = {}
    self.last_ack = {}
    self.snapshot_offsets = {}
    self.init_log()
    self.log.write(self.term, dict(NOOP))
    self.noop_index = self.log.last_log_index
    self.heartbeat_timer.start()
    self.step_down_timer.start()
    self.update_commit_index()
    apply_committed(self)
    self.heartbeat()
    RUNTIME.notify_role()


def leader_stop(self: Any) -> None:
    """Stop timers and fail in-flight proposals: they may or may not commit (FINDINGS 10)."""
    self.heartbeat_timer.stop()
    self.step_down_timer.stop()
    fail_waiters(self.state)
    RUNTIME.notify_role()


def leader_heartbeat(self: Any) -> None:
    """Heartbeat and step-down check by recent acknowledgements (Raft §6.2 check-quorum).

    raftos counted replies per heartbeat id, which B4 (one message in flight) makes miss;
    a leader stays only while a majority answered within the step-down interval.
    """
    if self.state.state is not self:
        return
    now = self.loop.time()
    recent = sum(1 for t in self.last_ack.values() if now - t < config.step_down_interval)
    if self.state.is_majority(recent + 1):
        self.step_down_timer.reset()
    self.request_id += 1
    _spawn(self.append_entries())


async def leader_append_entries(self: Any, destination: str | None = None) -> None:
    """Send the next AppendEntries (or snapshot chunk) to followers (B4, FINDINGS 7).

    raftos answered every reply with another message *and* started a fresh stream on every
    heartbeat and write, so a lagging follower got K copies of each entry with K growing
    every heartbeat and never caught up. Here at most one message is in flight per
    follower: a heartbeat or new write skips a follower with a recent outstanding message
    (it gets the entries when it answers), and a lost datagram is resent after about one
    heartbeat. Entries are batched up to the datagram budget.
    """
    if self.state.state is not self:
        return
    now = self.loop.time()
    targets = [destination] if destination else list(self.state.cluster)
    for follower in targets:
        sent = self.inflight.get(follower)
        recent = sent is not None and now - sent < 0.9 * config.heartbeat_interval
        if destination is None and recent:
            continue
        self.inflight[follower] = now
        if self.log.next_index[follower] <= self.log.base_index:
            _send_snapshot_chunk(self, follower)
        else:
            _send_entries(self, follower)


def _send_entries(leader: Any, follower: str) -> None:
    log = leader.log
    next_index = log.next_index[follower]
    prev = next_index - 1
    entries: list[dict[str, Any]] = []
    if log.last_log_index >= next_index:
        window = list(log.entries_from(next_index, MAX_BATCH_ENTRIES))
        entries = window[: RUNTIME.budget.pack_entries(window)]
    data = {
        "type": "append_entries",
        "term": leader.term,
        "leader_id": leader.id,
        "commit_index": log.commit_index,
        "request_id": leader.request_id,
        "prev_log_index": prev,
        "prev_log_term": log.term_at(prev),
        "entries": entries,
    }
    _spawn(leader.state.send(data, follower))


def _send_snapshot_chunk(leader: Any, follower: str) -> None:
    snapshots = leader.state.snapshots
    blob = snapshots.blob()
    index, term = snapshots.index, snapshots.term  # at or after the log's base
    at = leader.snapshot_offsets.get(follower)
    offset = at[1] if at is not None and at[0] == index else 0
    chunk = blob[offset : offset + RUNTIME.budget.snapshot_chunk]
    data = {
        "type": "install_snapshot",
        "term": leader.term,
        "leader_id": leader.id,
        "request_id": leader.request_id,
        "last_index": index,
        "last_term": term,
        "offset": offset,
        "total": len(blob),
        "data": base64.b64encode(chunk).decode(),
    }
    _spawn(leader.state.send(data, follower))


def _acknowledged(leader: Any, data: dict[str, Any]) -> str | None:
    """Common checks on a reply; the follower id, or None to ignore it.

    L2 (found while porting): a reply from an earlier term (possibly from our own earlier
    leadership) says nothing about the log now, and raftos counted it towards commits.
    """
    if leader.state.state is not leader or data.get("term") != leader.term:
        return None
    follower: str = leader.state.get_sender_id(data["sender"])
    if follower not in leader.log.next_index:
        return None
    leader.inflight.pop(follower, None)
    leader.last_ack[follower] = leader.loop.time()
    return follower


def leader_on_receive_append_entries_response(self: Any, data: dict[str, Any]) -> None:
    """AppendEntries reply (B3, FINDINGS "Medium"; Raft §5.3).

    ``match_index`` only moves forward: a late duplicate success must not lower it. A
    failure carries the follower's log end as a hint so the leader backs up in one step
    instead of one entry per round trip.
    """
    follower = _acknowledged(self, data)
    if follower is None:
        return
    log = self.log
    if data.get("success"):
        match = int(data["last_log_index"])
        if match >= log.match_index[follower]:
            log.match_index[follower] = match
            log.next_index[follower] = match + 1
            self.update_commit_index()
    else:
        hint = int(data.get("last_log_index", log.next_index[follower] - 1))
        backed_up = min(log.next_index[follower] - 1, hint + 1)
        # a late duplicate failure must not back up below what the follower acknowledged
        log.next_index[follower] = max(1, log.match_index[follower] + 1, backed_up)
    next_index = log.next_index[follower]
    if log.last_log_index >= next_index or next_index <= log.base_index:
        _spawn(self.append_entries(destination=follower))


def leader_on_receive_install_snapshot_response(self: Any, data: dict[str, Any]) -> None:
    """InstallSnapshot reply: continue at the offset the follower asks for, or resume
    sending entries once it holds the snapshot (Raft §7)."""
    follower = _acknowledged(self, data)
    if follower is None:
        return
    log = self.log
    if data.get("done"):
        index = int(data["last_index"])
        self.snapshot_offsets.pop(follower, None)
        if index >= log.match_index[follower]:
            log.match_index[follower] = index
            log.next_index[follower] = index + 1
            self.update_commit_index()
    else:
        self.snapshot_offsets[follower] = (int(data["last_index"]), int(data["next_offset"]))
    next_index = log.next_index[follower]
    if log.last_log_index >= next_index or next_index <= log.base_index:
        _spawn(self.append_entries(destination=follower))


def leader_update_commit_index(self: Any) -> None:
    """B1 (FINDINGS 3): commit the highest current-term index a majority holds (Raft §5.4.2).

    raftos scanned upwards and stopped at the first entry of an older term, so after a
    restart or leader change with an uncommitted older tail nothing ever committed again.
    Scanning down from the end finds the highest current-term N with a majority; entries
    before it commit with it.
    """
    term = getattr(self, "term", self.storage.term)
    log = self.log
    for index in range(log.last_log_index, log.commit_index, -1):
        if log.term_at(index) != term:
            break  # terms never decrease along the log: no current-term entry below
        count = 1 + sum(1 for m in log.match_index.values() if m >= index)
        if self.state.is_majority(count):
            log.commit_index = index
            break


def leader_append_command(self: Any, command: dict[str, Any]) -> asyncio.Future[int]:
    """Append ``command`` and return a future resolved with its index once applied here.

    One future per entry (FINDINGS 6: raftos shared one ``apply_future`` per leader, so
    concurrent writers hung and callers returned before their own entry was applied).
    """
    if self.state.state is not self:
        raise NotLeaderError(None)
    self.log.write(self.term, command)
    index = self.log.last_log_index
    fut: asyncio.Future[int] = self.loop.create_future()
    self.state.waiters[index] = (self.term, fut)
    self.update_commit_index()  # a single voter commits on its own
    apply_committed(self)
    _spawn(self.append_entries())
    return fut


async def leader_execute_command(self: Any, command: dict[str, Any]) -> int:
    """raftos's entry point, now waiting for this entry's own application."""
    return await leader_append_command(self, command)


# ---------------------------------------------------------------------------- node ----------
def node_init(self: Any, address: tuple[str, int], loop: asyncio.AbstractEventLoop) -> None:
    """F1: ``asyncio.Queue(loop=...)`` is a TypeError since Python 3.10."""
    self.host, self.port = address
    self.cluster = set()
    self.loop = loop
    self.state = rs.State(self)
    self.requests = asyncio.Queue()
    self.__class__.nodes.append(self)


async def node_start(self: Any) -> None:
    """Bind the UDP endpoint, keeping the protocol so ``stop`` can end its sender task."""
    from raftos.network import UDPProtocol

    protocol = UDPProtocol(queue=self.requests, request_handler=self.request_handler, loop=self.loop)
    self.transport, self.protocol = await self.loop.create_datagram_endpoint(
        protocol, local_addr=(self.host, self.port)
    )
    self.state.start()


def node_stop(self: Any) -> None:
    """Stop timers, close the socket and cancel the sender task (raftos leaked it)."""
    self.state.stop()
    self.transport.close()
    task = getattr(getattr(self, "protocol", None), "sender_task", None)
    if task is not None:
        task.cancel()


def protocol_connection_made(self: Any, transport: Any) -> None:
    self.transport = transport
    self.sender_task = asyncio.ensure_future(self.start())


def protocol_connection_lost(self: Any, exc: Exception | None) -> None:
    """raftos logged every clean close as an error."""
    if exc is not None:
        logger.error("raft UDP endpoint lost: %r", exc)


def protocol_datagram_received(self: Any, data: bytes, sender: tuple[str, int]) -> None:
    """N1 (found while porting): drop, don't raise on, datagrams we cannot authenticate,
    parse or attribute to a voter; a handler failure is logged, not raised into asyncio."""
    try:
        message = self.serializer.unpack(self.cryptor.decrypt(data))
    except Exception:
        RUNTIME.dropped_datagrams += 1
        return
    if not isinstance(message, dict) or "type" not in message:
        RUNTIME.dropped_datagrams += 1
        return
    if RUNTIME.peers and "{}:{}".format(*sender[:2]) not in RUNTIME.peers:
        RUNTIME.dropped_datagrams += 1
        return
    message["sender"] = sender
    try:
        self.request_handler(message)
    except Exception:
        logger.exception("raft handler failed on %s", message.get("type"))
