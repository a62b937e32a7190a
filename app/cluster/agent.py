"""The broker agent: registration, heartbeats and metadata following.

Every node runs one, voter or observer, including the node that is the
active controller (it then talks to its own controller in-process). The
agent owns the node's copy of the metadata image: it long-polls the active
controller for records after its version (or a full image when too far
behind) and tells the node what changed, so partition roles follow the
controller's decisions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from app.cluster.config import Voter
from app.cluster.controller import ControllerService, NotController
from app.cluster.peers import PeerError, Peers
from app.errors import ApiError
from app.purgatory import OffsetWaiters
from app.tasks import cancel_and_wait
from replication.controller.deltas import apply_delta
from replication.controller.errors import ControllerError
from replication.controller.image import MetadataImage

log = logging.getLogger("tidelog.agent")

ImageListener = Callable[[MetadataImage, MetadataImage | None], None]
"""Called with (new image, previous image or None for an in-place delta)."""

RETRY_S = 0.2


class BrokerAgent:
    def __init__(
        self,
        *,
        node_id: int,
        url: str,
        zone: str | None,
        clean: bool,
        controller: ControllerService | None,
        voters: dict[int, Voter],
        peers: Peers,
        heartbeat_interval_ms: int,
        metadata_wait_ms: int,
        leo_report: Callable[[], list[list[Any]]],
    ) -> None:
        self.node_id = node_id
        self.url = url
        self.zone = zone
        self.clean = clean
        self.controller = controller
        self.voters = voters
        self.peers = peers
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.metadata_wait_ms = metadata_wait_ms
        self.leo_report = leo_report
        self.image = MetadataImage()
        self.broker_epoch = -1
        self.registered = asyncio.Event()
        self._versions = OffsetWaiters()  # wakes wait_for_version
        self._listeners: list[ImageListener] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._controller_hint: int | None = None
        self.last_heartbeat_ok_s = -1.0

    def add_listener(self, cb: ImageListener) -> None:
        self._listeners.append(cb)

    # ---- finding and calling the controller ----------------------------------------------
    def _candidates(self) -> list[int]:
        """Voter ids to try, most likely controller first."""
        order: list[int] = []
        for v in (self._controller_hint, self.controller.mlog.leader_id if self.controller else None):
            if v is not None and v in self.voters and v not in order:
                order.append(v)
        order += [v for v in sorted(self.voters) if v not in order]
        return order

    async def call(self, op: str, body: dict[str, Any]) -> dict[str, Any]:
        """Send a command to the active controller, wherever it is (one hop).

        A refusal (a controller error code) is raised as ``ControllerError``.
        """
        return await self._on_controller(
            lambda c: c.handle(op, body), f"/internal/v1/controller/{op}", body,
            raise_refusals=True,
        )

    async def _metadata(self, version: int) -> dict[str, Any]:
        return await self._on_controller(
            lambda c: c.metadata_since(version, self.metadata_wait_ms),
            "/internal/v1/metadata", None, method="GET",
            params={"version": version, "wait_ms": self.metadata_wait_ms},
            timeout_s=self.metadata_wait_ms / 1000 + 5,
        )

    async def _on_controller(
        self,
        local: Callable[[ControllerService], Awaitable[dict[str, Any]]],
        path: str,
        body: dict[str, Any] | None,
        *,
        method: str = "POST",
        params: dict[str, Any] | None = None,
        timeout_s: float | None = None,
        raise_refusals: bool = False,
    ) -> dict[str, Any]:
        """Run on the local controller if it is active, else on the voters in turn,
        following ``NOT_CONTROLLER`` hints. UNAVAILABLE when nobody answers as controller."""
        if self.controller is not None and self.controller.active:
            try:
                return await local(self.controller)
            except NotController:
                pass
        last: Exception | None = None
        for vid in self._candidates():
            if vid == self.node_id:
                continue
            try:
                out = await self.peers.call(
                    f"{self.voters[vid].url}{path}", body, method=method, params=params,
                    timeout_s=timeout_s,
                )
                self._controller_hint = vid
                return out
            except PeerError as e:
                last = e
                if e.code == "NOT_CONTROLLER":
                    hint = e.body.get("leader_id")
                    self._controller_hint = hint if isinstance(hint, int) else None
                elif e.status != 0 and raise_refusals:
                    raise ControllerError(e.code, e.detail) from None
        raise ApiError("UNAVAILABLE", f"no active controller reachable ({last})", status=503)

    # ---- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._register_and_heartbeat_loop()),
            asyncio.create_task(self._metadata_loop()),
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)

    async def register(self) -> None:
        out = await self.call(
            "register",
            {"broker_id": self.node_id, "url": self.url, "zone": self.zone, "clean": self.clean,
             "log_end_offsets": self.leo_report()},
        )
        self.broker_epoch = int(out["broker_epoch"])
        await self.wait_for_version(int(out["version"]), 30)
        self.registered.set()
        log.info("registered as broker %d epoch %d", self.node_id, self.broker_epoch)

    async def _register_and_heartbeat_loop(self) -> None:
        while True:
            try:
                if self.broker_epoch < 0:
                    await self.register()
                out = await self.call(
                    "heartbeat",
                    {"broker_id": self.node_id, "broker_epoch": self.broker_epoch,
                     "log_end_offsets": self.leo_report()},
                )
                self.last_heartbeat_ok_s = asyncio.get_running_loop().time()
                if out.get("fenced"):
                    log.info("broker %d is fenced; heartbeats will unfence it", self.node_id)
            except ControllerError as e:
                if e.code in ("STALE_BROKER_EPOCH", "BROKER_NOT_REGISTERED"):
                    log.warning("re-registering: %s", e.detail)
                    self.broker_epoch = -1
                    self.registered.clear()
                    continue
                log.warning("heartbeat refused: %s %s", e.code, e.detail)
            except ApiError as e:
                log.debug("controller unavailable: %s", e.detail)
            except Exception:
                log.exception("heartbeat failed")
            await asyncio.sleep(
                self.heartbeat_interval_ms / 1000 if self.broker_epoch >= 0 else RETRY_S
            )

    async def _metadata_loop(self) -> None:
        while True:
            try:
                body = await self._metadata(self.image.version)
            except ApiError:
                await asyncio.sleep(RETRY_S)
                continue
            except Exception:
                log.exception("metadata fetch failed")
                await asyncio.sleep(RETRY_S)
                continue
            self.apply(body)

    def apply(self, body: dict[str, Any]) -> None:
        """Apply a delta or snapshot answer and notify listeners."""
        if "image" in body:
            new = apply_delta(self.image, body)
            if new.version < self.image.version and new.cluster_id == self.image.cluster_id:
                return  # never move backwards (a lagging controller answered)
            old, self.image = self.image, new
            for cb in self._listeners:
                cb(self.image, old)
        elif body.get("records"):
            apply_delta(self.image, body)
            for cb in self._listeners:
                cb(self.image, None)
        else:
            return
        self._versions.advance(self.image.version)

    async def wait_for_version(self, version: int, timeout_s: float) -> bool:
        """Wait until the local image has applied ``version`` (read-your-writes)."""
        return await self._versions.wait_for(version, timeout_s)
