"""The fault checker must fail: each safety rule on a small hand-written history that breaks it.

These histories are what the workload would record; no cluster runs here, so
they run everywhere (no root needed) and show each verdict is reachable.
"""

from __future__ import annotations

from typing import Any

from tests.fault.checker import check


def ok(t: float, rid: str, offset: int, invoked: float, p: int = 0) -> list[dict[str, Any]]:
    return [{"t": invoked, "type": "invoke", "id": rid, "partition": p, "node": 1},
            {"t": t, "type": "ok", "id": rid, "partition": p, "node": 1, "offset": offset, "invoked": invoked}]


def final(records: list[tuple[int, str | None]], p: int = 0) -> dict[str, Any]:
    return {"t": 99.0, "type": "final", "partition": p, "records": [list(r) for r in records]}


def history(*parts: list[dict[str, Any]] | dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for x in parts:
        out += x if isinstance(x, list) else [x]
    return sorted(out, key=lambda e: e["t"])


def test_a_clean_history_passes() -> None:
    h = history(ok(1.0, "a", 0, 0.5), ok(2.0, "b", 1, 1.5), final([(0, "a"), (1, "b")]))
    r = check(h, 1)
    assert r.ok and r.partitions[0].acked == 2 and r.violations() == {}


def test_an_acked_write_missing_from_the_final_log_is_lost() -> None:
    r = check(history(ok(1.0, "a", 0, 0.5), ok(2.0, "b", 1, 1.5), final([(0, "a")])), 1)
    assert not r.ok
    assert [v["id"] for v in r.violations()["lost"]] == ["b"]


def test_an_acked_write_found_at_another_offset_is_lost() -> None:
    r = check(history(ok(1.0, "a", 0, 0.5), {"t": 1.2, "type": "invoke", "id": "x", "partition": 0},
                      final([(0, "x"), (1, "a")])), 1)
    assert r.violations()["lost"][0]["found_at"] == [1]


def test_an_id_twice_in_the_log_is_duplicated() -> None:
    r = check(history(ok(1.0, "a", 0, 0.5), final([(0, "a"), (1, "a")])), 1)
    assert r.violations()["duplicated"][0]["offsets"] == [0, 1]


def test_a_write_acked_before_another_was_sent_but_placed_after_it_is_reordered() -> None:
    # b was acknowledged (t=2) before c was sent (t=2.5), yet c sits below b: reordered.
    # (Their acked offsets are wrong too, so both are also lost.)
    h = history(ok(1.0, "a", 0, 0.5), ok(2.0, "b", 1, 1.5), ok(3.0, "c", 2, 2.5),
                final([(0, "a"), (1, "c"), (2, "b")]))
    v = check(h, 1).violations()
    assert v["reordered"][0]["earlier"] == "b" and v["reordered"][0]["later"] == "c"


def test_concurrent_writes_may_land_in_either_order() -> None:
    # b and c overlap in time (c sent before b's ack), so either order is fine.
    h = history(ok(2.0, "b", 1, 1.0), ok(2.1, "c", 0, 1.5), final([(0, "c"), (1, "b")]))
    assert check(h, 1).ok


def test_a_record_nobody_wrote_is_a_phantom() -> None:
    r = check(history(ok(1.0, "a", 0, 0.5), final([(0, "a"), (1, None)])), 1)
    assert r.violations()["phantom"] == [{"partition": 0, "offset": 1, "id": None}]


def test_a_committed_read_the_final_log_does_not_hold_is_a_vanished_read() -> None:
    read = {"t": 1.5, "type": "read", "partition": 0, "node": 2, "offset": 0, "records": [[0, "a"], [1, "z"]],
            "hw": 2}
    r = check(history(ok(1.0, "a", 0, 0.5), read, final([(0, "a")])), 1)
    assert r.violations()["vanished_reads"][0]["id"] == "z"


def test_a_read_that_skips_offsets_is_a_read_gap() -> None:
    read = {"t": 1.5, "type": "read", "partition": 0, "node": 2, "offset": 0, "records": [[1, "b"]], "hw": 2}
    r = check(history(ok(1.0, "a", 0, 0.5), ok(1.1, "b", 1, 1.05), read, final([(0, "a"), (1, "b")])), 1)
    assert r.violations()["read_gaps"][0]["got_first"] == 1


def test_indeterminate_writes_may_be_present_or_absent() -> None:
    h = history(ok(1.0, "a", 0, 0.5),
                {"t": 1.2, "type": "invoke", "id": "m", "partition": 0},
                {"t": 4.0, "type": "fail", "id": "m", "partition": 0, "code": "TIMEOUT", "node": 1},
                {"t": 4.1, "type": "invoke", "id": "n", "partition": 0},
                {"t": 4.2, "type": "fail", "id": "n", "partition": 0, "code": "ConnectError", "node": 1},
                final([(0, "a"), (1, "m")]))
    r = check(h, 1)
    assert r.ok
    assert (r.partitions[0].indeterminate, r.partitions[0].indeterminate_present) == (2, 1)


def test_a_partition_without_a_final_read_fails_the_run() -> None:
    r = check(history(ok(1.0, "a", 0, 0.5), final([(0, "a")])), 2)
    assert not r.ok and "partition 1" in r.notes[0]


def test_ack_gaps_become_windows_attributed_to_the_fault_that_caused_them() -> None:
    h = history(ok(1.0, "a", 0, 0.9), ok(2.0, "b", 1, 1.9),
                {"t": 2.5, "type": "fault-start", "fault": 1, "kind": "kill-leader", "target": 1},
                {"t": 5.0, "type": "fault-end", "fault": 1, "kind": "kill-leader"},
                ok(6.0, "c", 2, 5.9),
                {"t": 7.0, "type": "healthy", "fault": 1},
                ok(7.5, "d", 3, 7.4), ok(20.0, "e", 4, 19.9),
                {"t": 20.5, "type": "invoke", "id": "f", "partition": 0},
                {"t": 23.0, "type": "fail", "id": "f", "partition": 0, "code": "TIMEOUT", "node": 1},
                final([(0, "a"), (1, "b"), (2, "c"), (3, "d"), (4, "e")]))
    w = check(h, 1, gap_s=1.0).partitions[0].windows
    # 6.0 -> 7.5 starts before the cluster was healthy again (7.0): still fault 1's.
    # 7.5 -> 20.0 starts on a healthy cluster: no fault. 20.0 -> 23.0 is open at the end.
    assert [(x["start"], x["end"], x["faults"], x["open_at_end"]) for x in w] == [
        (2.0, 6.0, [1], False), (6.0, 7.5, [1], False), (7.5, 20.0, [], False), (20.0, 23.0, [], True)]


def test_a_read_past_the_final_log_counts_only_if_it_came_before_the_final_read() -> None:
    def read(t: float) -> dict[str, Any]:
        return {"t": t, "type": "read", "partition": 0, "node": 2, "offset": 1, "records": [[1, "late"]], "hw": 2}

    base: list[list[dict[str, Any]] | dict[str, Any]] = [
        ok(1.0, "a", 0, 0.5), {"t": 2.0, "type": "invoke", "id": "late", "partition": 0},
        {"t": 5.0, "type": "fail", "id": "late", "partition": 0, "code": "TIMEOUT", "node": 1},
        final([(0, "a")]),  # the final read, at t=99
    ]
    assert check(history(*base, read(120.0)), 1).ok, "committed after the final read: not judged"
    assert check(history(*base, read(50.0)), 1).violations()["vanished_reads"][0]["id"] == "late"
