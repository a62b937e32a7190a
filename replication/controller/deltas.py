"""Metadata propagation helpers: recent records for deltas, full image otherwise.

Brokers long-poll the active controller with the metadata version they have
applied (ARCHITECTURE.md "Controller on raftos"). The service keeps the last
``capacity`` committed records in memory; a broker within that window gets the
records after its version, a broker further behind (or new) gets the full
image (``MetadataImage.to_dict``) and continues with deltas from there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from replication.controller import records as R
from replication.controller.image import MetadataImage


class RecentRecords:
    """The newest committed records, each tagged with the image version it produced.

    Version ``v`` is the image version *after* applying the record, so a
    broker at version ``V`` needs the records tagged ``V + 1`` onwards.
    """

    def __init__(self, capacity: int, version: int = 0) -> None:
        """``version``: the image version the window starts after (records before it
        are unknown here; a broker at an older version needs the full image)."""
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self._records: deque[tuple[int, R.Record]] = deque(maxlen=capacity)
        self._base = version
        self._latest = version

    @property
    def latest_version(self) -> int:
        """Version after the newest record known here."""
        return self._latest

    @property
    def oldest_version(self) -> int:
        """Oldest version a broker may be at and still get deltas."""
        return self._records[0][0] - 1 if self._records else self._latest

    def append(self, version: int, record: R.Record) -> None:
        """Remember a record just applied; ``version`` must be ``latest_version + 1``."""
        if version != self._latest + 1:
            raise ValueError(f"record version {version} does not follow {self._latest}")
        self._records.append((version, record))
        self._latest = version

    def extend(self, first_version: int, records: Iterable[R.Record]) -> None:
        """Append records applied in order, the first producing ``first_version``."""
        for i, rec in enumerate(records):
            self.append(first_version + i, rec)

    def since(self, version: int) -> list[R.Record] | None:
        """Records after ``version``; ``None`` when too far behind (send the full image).

        A version at or beyond ``latest_version`` gets ``[]``: this node has
        nothing newer yet and the caller long-polls (a broker can be ahead of
        a controller that is still applying the committed log; answering with
        an older full image would move it backwards).
        """
        if version >= self._latest:
            return []
        if version < self.oldest_version:
            return None
        skip = version - self.oldest_version
        return [rec for _, rec in list(self._records)[skip:]]


def delta_response(image: MetadataImage, recent: RecentRecords, version: int) -> dict[str, Any]:
    """The JSON body a metadata long-poll answers with.

    ``{"version": V', "records": [...]}`` when deltas suffice, else
    ``{"version": V', "image": {...}}``; ``V'`` is the version the broker
    reaches after applying it. ``image`` and ``recent`` must describe the same
    version.
    """
    if recent.latest_version != image.version:
        raise ValueError("recent records and image disagree on the version")
    recs = recent.since(version)
    if recs is None:
        return {"version": image.version, "image": image.to_dict()}
    return {"version": max(version, image.version), "records": [r.to_dict() for r in recs]}


def apply_delta(image: MetadataImage, body: dict[str, Any]) -> MetadataImage:
    """Broker side of ``delta_response``: the image after applying the answer.

    Returns a new image for a full snapshot, else ``image`` itself after
    applying the records in order.
    """
    if "image" in body:
        return MetadataImage.from_dict(body["image"])
    for d in body["records"]:
        image.apply(R.record_from_dict(d))
    return image
