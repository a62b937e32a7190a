"""Restarts of a real node on the same data directory: SIGKILL mid-load, clean stop, and a
torn tail written into the active segment while the node is down.

The invariant throughout: every acknowledged record is there after the restart, at the
offset it was acknowledged with, with its value, and offsets stay contiguous.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from app.node import partition_for_key
from app.storage.batch import CorruptBatchError, iter_records
from tests.integration.conftest import newest_segment, read_all, wait_until
from tests.support.node import NodeProcess

PARTITIONS = 3


def _create(c: httpx.Client, name: str, partitions: int = PARTITIONS) -> None:
    r = c.post("/v1/topics", json={"name": name, "partitions": partitions})
    assert r.status_code == 201, r.text


def _wait_online(c: httpx.Client, topic: str, timeout_s: float = 20.0) -> list[dict[str, Any]]:
    """Poll until every partition is online and led by this node; returns PartitionStates.

    Readiness means "registered, metadata loaded"; leadership may be confirmed a moment
    later, so tests wait for it (with a deadline) instead of expecting it at once.
    """

    def online() -> list[dict[str, Any]] | None:
        parts = c.get(f"/v1/topics/{topic}").json()["partitions"]
        ok = all(p["status"] == "online" and p["leader"] == 1 for p in parts)
        return parts if ok else None

    try:
        return wait_until(online, timeout_s, f"{topic} online")  # type: ignore[no-any-return]
    except AssertionError:
        states = [
            (p["partition"], p["status"], p["leader"], p["isr"])
            for p in c.get(f"/v1/topics/{topic}").json()["partitions"]
        ]
        raise AssertionError(f"{topic} not online after restart: {states}") from None


def _assert_contiguous(records: list[dict[str, Any]]) -> None:
    offs = [r["offset"] for r in records]
    first = offs[0] if offs else 0
    assert offs == list(range(first, first + len(offs))), offs[:20]


class Producer(threading.Thread):
    """Produces acks=all batches until the node goes away, recording every acknowledgement.

    ``acked`` maps (partition, offset) to the value the node acknowledged there.
    Any transport error ends the thread: after a SIGKILL the node is gone.
    """

    def __init__(self, url: str, topic: str, batch: int = 25) -> None:
        super().__init__(daemon=True)
        self.url, self.topic, self.batch = url, topic, batch
        self.acked: dict[tuple[int, int], dict[str, Any]] = {}
        self.requests = 0
        self.error: BaseException | None = None
        self._lock = threading.Lock()

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def run(self) -> None:
        seq = 0
        with httpx.Client(base_url=self.url, timeout=10) as c:
            while True:
                recs = [
                    {"key": f"k{(seq + i) % 17}", "value": {"seq": seq + i, "pad": "p" * 40}} for i in range(self.batch)
                ]
                try:
                    r = c.post(
                        f"/v1/topics/{self.topic}/records",
                        json={"records": recs},
                        params={"acks": "all"},
                    )
                except httpx.TransportError:
                    return
                if r.status_code != 200:
                    self.error = AssertionError(f"produce failed: {r.status_code} {r.text}")
                    return
                with self._lock:
                    for rec, o in zip(recs, r.json()["offsets"], strict=True):
                        self.acked[(o["partition"], o["offset"])] = rec
                    self.requests += 1
                seq += self.batch


def _check_acked_present(c: httpx.Client, topic: str, acked: dict[tuple[int, int], Any]) -> int:
    """Every acknowledged record is at its offset with its value; returns records read."""
    total = 0
    for p in range(PARTITIONS):
        got = read_all(c, topic, p)
        total += len(got)
        _assert_contiguous(got)
        if got:
            assert got[0]["offset"] == 0
        by_offset = {r["offset"]: r for r in got}
        mine = {o: rec for (pp, o), rec in acked.items() if pp == p}
        missing = sorted(o for o in mine if o not in by_offset)
        assert not missing, f"partition {p}: acknowledged offsets lost: {missing[:20]}"
        for o, rec in mine.items():
            assert by_offset[o]["value"] == rec["value"], (p, o)
            assert by_offset[o]["key"] == rec["key"], (p, o)
            assert partition_for_key(rec["key"].encode(), PARTITIONS) == p
    return total


def _records_on_disk(data_dir: Path, topic: str, partition: int) -> dict[int, tuple[Any, Any]]:
    """offset → (key, value) decoded straight from a stopped node's segment files.

    Stops at the first incomplete batch (a tail the node would truncate on restart).
    """
    out: dict[int, tuple[Any, Any]] = {}
    pdir = data_dir / "logs" / f"{topic}-{partition}"
    for seg in sorted(pdir.glob("*.log"), key=lambda f: int(f.stem)):
        try:
            for off, _ts, _epoch, body in iter_records(seg.read_bytes()):
                d = orjson.loads(bytes(body))
                out[off] = (d.get("key"), d.get("value"))
        except CorruptBatchError:
            break
    return out


def test_sigkill_mid_load_keeps_every_acknowledged_record(node: NodeProcess) -> None:
    topic = "under-load"
    with httpx.Client(base_url=node.url) as c:
        _create(c, topic)
    prod = Producer(node.url, topic)
    prod.start()
    wait_until(lambda: prod.count() >= 3000 or prod.error, 60, "3000 acknowledged records")
    assert prod.error is None, prod.error
    node.kill()
    prod.join(30)
    assert not prod.is_alive()
    assert prod.error is None, prod.error
    acked = dict(prod.acked)
    assert len(acked) >= 3000

    # Before any recovery: every acknowledged record is in the segment files (the page
    # cache survives SIGKILL), whatever the node will make of them on restart.
    for p in range(PARTITIONS):
        on_disk = _records_on_disk(node.data_dir, topic, p)
        for (pp, o), rec in acked.items():
            if pp == p:
                assert on_disk.get(o) == (rec["key"], rec["value"]), (p, o)

    node.start()
    with httpx.Client(base_url=node.url, timeout=30) as c:
        _wait_online(c, topic)
        total = _check_acked_present(c, topic, acked)
        # Records written but not acknowledged before the kill may exist too; nothing else.
        assert total >= len(acked)
        assert total <= len(acked) + prod.batch
        # The node was killed: it reports an unclean start, and keeps serving.
        (broker,) = c.get("/v1/cluster").json()["brokers"]
        assert broker["clean"] is False
        leos = {p["partition"]: p["log_end_offset"] for p in c.get(f"/v1/topics/{topic}").json()["partitions"]}
        r = c.post(f"/v1/topics/{topic}/records", json={"records": [{"key": "k0", "value": "after"}]})
        assert r.status_code == 200, r.text
        (o,) = r.json()["offsets"]
        assert o["offset"] == leos[o["partition"]], "the log continues right after its end"


def test_unclean_restart_keeps_partitions_online(node: NodeProcess) -> None:
    """A single node is the whole ISR: after SIGKILL it must lead its partitions again."""
    with httpx.Client(base_url=node.url) as c:
        _create(c, "after-kill", 2)
        assert c.post("/v1/topics/after-kill/records", json={"records": [{"value": 1}]}).status_code == 200
    node.kill()
    node.start()
    with httpx.Client(base_url=node.url) as c:
        for p in _wait_online(c, "after-kill"):
            assert p["isr"] == [1], p
        r = c.post(
            "/v1/topics/after-kill/records",
            params={"acks": "all"},
            json={"records": [{"value": 2}]},
        )
        assert r.status_code == 200, r.text


def test_clean_stop_start_keeps_everything_and_reports_clean(node: NodeProcess) -> None:
    topic = "clean"
    with httpx.Client(base_url=node.url) as c:
        _create(c, topic)
        produced: dict[tuple[int, int], dict[str, Any]] = {}
        for i in range(20):
            recs = [{"key": f"k{j}", "value": {"i": i, "j": j}} for j in range(10)]
            r = c.post(f"/v1/topics/{topic}/records", json={"records": recs})
            assert r.status_code == 200
            for rec, o in zip(recs, r.json()["offsets"], strict=True):
                produced[(o["partition"], o["offset"])] = rec
        before = {p: read_all(c, topic, p) for p in range(PARTITIONS)}
        epoch_before = c.get("/readyz").json()["broker_epoch"]
    # uvicorn re-raises SIGTERM after its graceful shutdown: -15 is a clean exit too.
    assert node.stop() in (0, -15)
    # What a crash in the middle of a topic deletion leaves behind; the start removes it.
    leftover = node.data_dir / "logs" / ".deleted~0123abcd"
    (leftover / "sub").mkdir(parents=True)
    (leftover / "00000000000000000000.log").write_bytes(b"old")
    node.start()
    with httpx.Client(base_url=node.url) as c:
        _wait_online(c, topic)
        assert _check_acked_present(c, topic, produced) == len(produced)
        assert {p: read_all(c, topic, p) for p in range(PARTITIONS)} == before
        (broker,) = c.get("/v1/cluster").json()["brokers"]
        assert broker["clean"] is True
        assert not leftover.exists()
        assert c.get("/readyz").json()["broker_epoch"] > epoch_before
        for p in c.get(f"/v1/topics/{topic}").json()["partitions"]:
            assert p["status"] == "online" and p["isr"] == [1]
            assert p["high_watermark"] == p["log_end_offset"] == len(before[p["partition"]])


def test_key_partitioning_is_stable_across_restart(node: NodeProcess) -> None:
    keys = [f"key-{i}" for i in range(30)]
    with httpx.Client(base_url=node.url) as c:
        _create(c, "keys", 5)
        r = c.post("/v1/topics/keys/records", json={"records": [{"key": k, "value": 0} for k in keys]})
        first = [o["partition"] for o in r.json()["offsets"]]
    node.stop()
    node.start()
    with httpx.Client(base_url=node.url) as c:
        _wait_online(c, "keys")
        r = c.post("/v1/topics/keys/records", json={"records": [{"key": k, "value": 1} for k in keys]})
        assert [o["partition"] for o in r.json()["offsets"]] == first


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_torn_tail_is_truncated_on_restart(node: NodeProcess, how: str, topic_name: Callable[[], str]) -> None:
    topic = topic_name()
    with httpx.Client(base_url=node.url) as c:
        _create(c, topic, 1)
        for i in range(10):
            recs = [{"value": {"batch": i, "n": n}} for n in range(5)]
            assert c.post(f"/v1/topics/{topic}/records", json={"records": recs}).status_code == 200
        before = read_all(c, topic, 0)
        assert len(before) == 50
    node.stop() if how == "stop" else node.kill()

    seg = newest_segment(node.data_dir, topic, 0)
    size = seg.stat().st_size
    with seg.open("ab") as f:
        # Looks like the start of a batch header that never finished, then junk.
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x32\x00\x00\x01\x00" + b"\xde\xad\xbe\xef" * 64)

    node.start()
    with httpx.Client(base_url=node.url) as c:
        _wait_online(c, topic)
        assert read_all(c, topic, 0) == before
        assert read_all(c, topic, 0, isolation="uncommitted") == before
        desc = c.get(f"/v1/topics/{topic}/partitions/0").json()
        assert desc["log_end_offset"] == desc["high_watermark"] == 50
        r = c.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "next"}]})
        assert r.json()["offsets"] == [{"partition": 0, "offset": 50}]
        after = read_all(c, topic, 0)
        assert after[:50] == before and after[50]["value"] == "next"
        events = c.get(f"/v1/topics/{topic}/partitions/0/events").json()["events"]
        assert any(e.get("kind", e.get("event")) == "recovery_truncation" for e in events), events
    assert seg.stat().st_size > size  # the new batch went after the truncation point...
    with seg.open("rb") as f:
        assert b"\xde\xad\xbe\xef" not in f.read()  # ...and the garbage is gone
