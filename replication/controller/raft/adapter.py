"""``RaftMetadataLog``: the controller's replicated key-value log on top of patched raftos.

See the package docstring for the contract. Internals worth knowing:
- raftos keeps its state on class attributes and one global config, so only one
  ``RaftMetadataLog`` may run per process (``start`` refuses a second one).
- Writes go through one asyncio lock with a deadline (FINDINGS 6, 10): a proposal is split
  into datagram-sized entries, appended, and awaited per entry until applied locally.
- Leadership is tracked by polling raftos (its callbacks fire only on some transitions,
  FINDINGS r08) and by role-change hooks from the patched leader; ``is_leader`` is True
  only once this term's no-op entry is applied, i.e. the local state is current.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raftos import server as rserver
from raftos import state as rs
from raftos.conf import config

from . import patches
from .codec import DEFAULT_MAX_DATAGRAM_BYTES, SizeBudget
from .errors import CommandTooLarge, LeadershipLost, NotLeaderError, ProposalTimeout
from .machine import NOOP, ApplyListener
from .protocol import RUNTIME, fail_waiters
from .storage import DirLock

logger = logging.getLogger(__name__)

LeaderListener = Callable[[int | None, bool], None]

#: How often the leader id is polled from raftos.
LEADER_POLL_INTERVAL_S = 0.05

_ACTIVE: RaftMetadataLog | None = None


@dataclass
class RaftSettings:
    """Static configuration of one voter.

    ``voters`` is the fixed voter set (Raft membership changes are not supported) and must
    contain ``node_id``: a node that is not a voter (an observer broker) does not run raft;
    it learns metadata from the active controller over HTTP.
    """

    node_id: int
    raft_addr: tuple[str, int]
    voters: dict[int, tuple[str, int]]
    data_dir: Path
    secret: str
    request_timeout_s: float = 5.0
    #: compact (snapshot + drop the log prefix) once this many applied entries accumulate;
    #: bounds restart replay and catch-up. None disables compaction (tests, benchmarks).
    max_log_entries: int | None = 1000
    heartbeat_interval_s: float = 0.3
    max_datagram_bytes: int = DEFAULT_MAX_DATAGRAM_BYTES


@functools.lru_cache(maxsize=64)
def _resolve(host: str, port: int) -> tuple[str, int]:
    """raftos identifies a sender by its UDP source address, so names must become IPv4."""
    info = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)
    return str(info[0][4][0]), port


def _raft_id(addr: tuple[str, int]) -> str:
    host, port = _resolve(*addr)
    return f"{host}:{port}"


class RaftMetadataLog:
    """A replicated map of JSON values, changed only through raft commits."""

    def __init__(self, settings: RaftSettings) -> None:
        if settings.node_id not in settings.voters:
            raise ValueError(
                f"node {settings.node_id} is not in the voter set {sorted(settings.voters)}: observers do not run raft"
            )
        if tuple(settings.voters[settings.node_id]) != tuple(settings.raft_addr):
            raise ValueError("raft_addr must equal this node's entry in voters")
        if any(host in ("0.0.0.0", "") for host, _ in settings.voters.values()):
            # raftos names peers by the source address of their datagrams
            raise ValueError("voter raft addresses must be routable, not a wildcard")
        self.settings = settings
        self.directory = Path(settings.data_dir) / "raft"
        self._budget = SizeBudget(settings.max_datagram_bytes)
        self._ids = {_raft_id(addr): node_id for node_id, addr in settings.voters.items()}
        if len(self._ids) != len(settings.voters):
            raise ValueError("two voters share one raft address")
        self._self_raft_id = _raft_id(settings.raft_addr)
        self._write_lock = asyncio.Lock()
        self._apply_listeners: list[ApplyListener] = []
        self._leader_listeners: list[LeaderListener] = []
        self._node: Any = None
        self._lock: DirLock | None = None
        self._poll_task: asyncio.Task[None] | None = None
        self._last_seen: tuple[int | None, bool] = (None, False)
        self._ready = asyncio.Event()

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Load state from disk, bind the UDP port and join the cluster.

        A single voter elects itself immediately (no election timeout to wait for).
        """
        global _ACTIVE
        if _ACTIVE is not None:
            raise RuntimeError(
                "a raft node is already running in this process (raftos keeps its state on class attributes)"
            )
        patches.install()
        self._lock = DirLock(self.directory)
        _ACTIVE = self
        try:
            self._reset_raftos_globals()
            patches.configure(
                log_path=str(self.directory),
                heartbeat_interval_s=self.settings.heartbeat_interval_s,
                secret=self.settings.secret,
            )
            RUNTIME.__init__()  # type: ignore[misc]
            RUNTIME.budget = self._budget
            RUNTIME.max_log_entries = self.settings.max_log_entries
            RUNTIME.peers = set(self._ids)
            RUNTIME.role_listeners.append(self._check_leader)
            loop = asyncio.get_running_loop()
            host, port = _resolve(*self.settings.raft_addr)
            self._node = rserver.Node(address=(host, port), loop=loop)
            machine = self._node.state.state_machine
            machine.listeners.append(self._on_apply)
            for raft_id in self._ids:
                if raft_id != self._self_raft_id:
                    h, p = raft_id.rsplit(":", 1)
                    self._node.update_cluster((h, int(p)))
            await self._node.start()
        except BaseException:
            self._release()
            raise
        self._poll_task = asyncio.create_task(self._poll_leader_loop())
        if len(self._ids) == 1:
            # A single voter needs nobody: elect now and return leading, state current.
            self._node.state.to_candidate()
            deadline = loop.time() + self.settings.request_timeout_s
            while not self.is_leader and loop.time() < deadline:
                await asyncio.sleep(0.001)
            self._check_leader()

    async def stop(self) -> None:
        """Leave the cluster: stop timers and socket, fail pending proposals."""
        if self._poll_task is not None:
            self._poll_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poll_task
            self._poll_task = None
        if self._node is not None:
            self._node.stop()
            fail_waiters(self._node.state)
            self._node = None
        self._release()
        await asyncio.sleep(0)  # let the cancelled sender task finish

    def _release(self) -> None:
        global _ACTIVE
        self._reset_raftos_globals()
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if _ACTIVE is self:
            _ACTIVE = None

    @staticmethod
    def _reset_raftos_globals() -> None:
        rserver.Node.nodes.clear()
        rs.State.leader = None
        rs.State.leader_future = None
        rs.State.wait_until_leader_id = None
        rs.State.wait_until_leader_future = None

    # -- leadership ----------------------------------------------------------------------------
    @property
    def _role(self) -> Any:
        return None if self._node is None else self._node.state.state

    @property
    def is_leader(self) -> bool:
        """True when we lead *and* this term's no-op is applied (our state is current)."""
        role = self._role
        return isinstance(role, rs.Leader) and hasattr(role, "noop_index") and role.log.last_applied >= role.noop_index

    @property
    def leader_id(self) -> int | None:
        """tidelog id of the leader as far as we know; None during elections or when the
        leader has been silent for a step-down interval (raftos keeps a dead leader's id)."""
        role = self._role
        if role is None:
            return None
        if isinstance(role, rs.Leader):
            return self.settings.node_id
        leader = rs.State.get_leader()
        if leader is None:
            return None
        silent_s = self._node.loop.time() - self._node.state.last_leader_contact
        if silent_s > config.step_down_interval:
            return None
        return self._ids.get(str(leader))

    @property
    def term(self) -> int:
        """Current raft term (0 before start)."""
        return 0 if self._node is None else int(self._node.state.storage.term)

    def add_leader_listener(self, cb: LeaderListener) -> None:
        """``cb(leader_id, we_lead)`` on every change, from the event loop."""
        self._leader_listeners.append(cb)

    def _check_leader(self) -> None:
        if self._node is None:
            return
        seen = (self.leader_id, self.is_leader)
        if seen[1]:
            self._ready.set()
        else:
            self._ready.clear()
        if seen == self._last_seen:
            return
        self._last_seen = seen
        for cb in list(self._leader_listeners):
            try:
                cb(*seen)
            except Exception:
                logger.exception("raft leader listener failed")

    async def _poll_leader_loop(self) -> None:
        while True:
            self._check_leader()
            await asyncio.sleep(LEADER_POLL_INTERVAL_S)

    # -- state ---------------------------------------------------------------------------------
    def state(self) -> Mapping[str, Any]:
        """Applied key-value state (read-only live view). Call ``barrier`` first on the
        leader before trusting it for a linearizable read (FINDINGS 11)."""
        if self._node is None:
            raise RuntimeError("raft log is not started")
        view: Mapping[str, Any] = self._node.state.state_machine.view()
        return view

    @property
    def applied_index(self) -> int:
        """Index of the last entry applied locally (0 before anything)."""
        return 0 if self._node is None else int(self._node.state.log.last_applied)

    def request_applied_index(self, request_id: str) -> int | None:
        """Where ``request_id`` was applied; None if it has not been (or was forgotten after
        ``MAX_REQUEST_IDS`` newer ones). Use after a ``ProposalTimeout``."""
        if self._node is None:
            return None
        index: int | None = self._node.state.state_machine.request_index(request_id)
        return index

    def add_apply_listener(self, cb: ApplyListener) -> None:
        """``cb(index, updates)`` for every applied change set, in log order, on every
        replica. ``updates`` maps keys to absolute values, None meaning deleted. No-ops are
        not reported; a snapshot installed from the leader is reported as one change set
        holding the difference."""
        self._apply_listeners.append(cb)

    def _on_apply(self, index: int, updates: dict[str, Any]) -> None:
        for cb in list(self._apply_listeners):
            try:
                cb(index, updates)
            except Exception:
                logger.exception("raft apply listener failed at %d", index)

    # -- writes --------------------------------------------------------------------------------
    async def propose(self, updates: dict[str, Any | None], request_id: str | None = None) -> int:
        """Commit ``updates`` (absolute values; None deletes) and return the index at which
        they were applied locally.

        Raises ``NotLeaderError`` (nothing appended), ``ProposalTimeout`` (outcome unknown:
        check ``request_applied_index(request_id)``), ``CommandTooLarge`` when one key's
        value alone cannot fit in a datagram. A change set larger than one datagram is
        split over several entries and applied atomically with the last one.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.request_timeout_s
        txn = uuid.uuid4().hex
        commands = self._budget.split_updates(dict(updates), request_id, txn)
        if commands is None:
            raise CommandTooLarge(
                f"a single key's value exceeds the {self.settings.max_datagram_bytes}-byte encrypted datagram limit"
            )
        self._require_leader()
        try:
            await asyncio.wait_for(self._write_lock.acquire(), self._remaining(deadline))
        except TimeoutError:
            raise ProposalTimeout("timed out waiting for the raft writer lock") from None
        try:
            await self._wait_ready(deadline)
            if request_id is not None:
                done = self.request_applied_index(request_id)
                if done is not None:
                    return done
            futures = [self._append(cmd) for cmd in commands]
            return await self._await_applied(futures, deadline)
        finally:
            self._write_lock.release()

    async def barrier(self) -> None:
        """Commit and apply a no-op of the current term (Raft §8 read-index via log).

        After it returns, ``state()`` reflects every write committed before the call, so
        a deposed leader cannot serve stale reads (FINDINGS 11).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.request_timeout_s
        self._require_leader()
        await self._wait_ready(deadline)
        await self._await_applied([self._append(dict(NOOP))], deadline)

    def _require_leader(self) -> None:
        if not isinstance(self._role, rs.Leader):
            raise NotLeaderError(self.leader_id)

    async def _wait_ready(self, deadline: float) -> None:
        """Wait for this term's no-op to apply; a new leader's state may lag until then."""
        while not self.is_leader:
            if not isinstance(self._role, rs.Leader):
                raise NotLeaderError(self.leader_id)
            self._check_leader()
            if self.is_leader:
                break
            try:
                await asyncio.wait_for(self._ready.wait(), min(self._remaining(deadline), 0.05))
            except TimeoutError:
                if self._remaining(deadline) <= 0:
                    raise ProposalTimeout("leader did not become ready in time") from None

    def _append(self, command: dict[str, Any]) -> asyncio.Future[int]:
        role = self._role
        if not isinstance(role, rs.Leader):
            raise LeadershipLost(self.leader_id)
        fut: asyncio.Future[int] = role.append_command(command)
        return fut

    async def _await_applied(self, futures: list[asyncio.Future[int]], deadline: float) -> int:
        try:
            done = await asyncio.wait_for(asyncio.gather(*futures), self._remaining(deadline))
        except TimeoutError:
            raise ProposalTimeout("proposal not applied in time; outcome unknown") from None
        except LeadershipLost as exc:
            raise LeadershipLost(self.leader_id) from exc
        return int(done[-1])

    @staticmethod
    def _remaining(deadline: float) -> float:
        return max(0.0, deadline - asyncio.get_running_loop().time())

    # -- introspection (tests, /v1/cluster) ----------------------------------------------------
    def status(self) -> dict[str, Any]:
        """A JSON-able summary of this node's raft state."""
        if self._node is None:
            return {"running": False}
        st = self._node.state
        return {
            "running": True,
            "node_id": self.settings.node_id,
            "role": type(st.state).__name__.lower(),
            "term": st.storage.term,
            "leader_id": self.leader_id,
            "is_leader": self.is_leader,
            "commit_index": st.log.commit_index,
            "applied_index": st.log.last_applied,
            "log_base_index": st.log.base_index,
            "log_entries": len(st.log.cache),
            "snapshots_taken": RUNTIME.snapshots_taken,
            "snapshots_installed": RUNTIME.snapshots_installed,
            "dropped_datagrams": RUNTIME.dropped_datagrams,
        }
