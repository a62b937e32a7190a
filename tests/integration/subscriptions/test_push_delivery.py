"""Push subscriptions on a real node delivering to real receivers on loopback (issue 8 item 4)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import httpx

from app.client import Client
from tests.integration.conftest import assert_problem, read_all, wait_until
from tests.integration.subscriptions.conftest import (
    FAST_RETRY,
    PUSH_ENV,
    create_subscription,
    produce,
    subscription,
    wait_status,
)
from tests.support.node import NodeProcess
from tests.support.receiver import Receiver, check_signature

SECRET = "a-secret-of-enough-length"


def _topic(node: NodeProcess, name: str, partitions: int = 1) -> None:
    with node.client() as c:
        c.create_topic(name, partitions=partitions)


def test_push_delivers_every_record_in_order_with_signatures_that_verify(
    shared_push_node: NodeProcess, receiver_factory: Callable[..., Receiver]
) -> None:
    rc = receiver_factory(secret=SECRET)
    _topic(shared_push_node, "orders", partitions=2)
    produced = {0: [], 1: []}  # type: dict[int, list[int]]
    for i in range(6):  # some records exist before the subscription, more arrive after
        values = [i * 1000 + j for j in range(37)]
        for o, v in zip(produce(shared_push_node.url, "orders", values), values, strict=True):
            produced[o["partition"]].append(v)
        if i == 2:
            sub = create_subscription(shared_push_node.url, id="in-order", topic="orders", url=rc.url,
                                      start="earliest", batch_size=16, secret=SECRET,
                                      headers={"X-Team": "billing", "Authorization": "Bearer t0ken"})
            assert sub["secret_set"] is True and "secret" not in sub
            assert sub["headers"] == {"X-Team": "billing", "Authorization": "<redacted>"}
    for p in (0, 1):
        got = rc.wait_offsets(p, len(produced[p]))
        assert got == list(range(len(produced[p]))), f"partition {p}: not in order or duplicated"
        assert [rc.values(p)[o] for o in range(len(produced[p]))] == produced[p]
    reqs = rc.accepted()
    assert all(r.signature_ok for r in reqs), "a request's Tidelog-Signature did not verify"
    for r in reqs:
        b = r.body
        assert len(b["records"]) <= 16
        assert r.headers["x-team"] == "billing" and r.headers["authorization"] == "Bearer t0ken"
        assert r.headers["tidelog-delivery-id"] == f"in-order:{b['partition']}:{b['first_offset']}"
        assert b["delivery_id"] == r.headers["tidelog-delivery-id"]
        assert [x["offset"] for x in b["records"]] == list(range(b["first_offset"], b["last_offset"] + 1))
        assert b["subscription"] == "in-order" and b["topic"] == "orders"
    st = wait_status(shared_push_node.url, "in-order", lambda s: s["status"]["lag"] == 0
                     and s["status"]["delivered"] == sum(map(len, produced.values())), what="lag 0")
    assert st["status"]["state"] == "active" and st["status"]["dead_lettered"] == 0
    assert st["status"]["last_success_ms"] is not None and st["status"]["last_error"] is None
    metrics = httpx.get(f"{shared_push_node.url}/metrics").text
    assert 'tidelog_subscription_lag_records{partition="0",subscription="in-order",topic="orders"} 0.0' in metrics
    assert f'tidelog_subscription_cursor{{partition="1",subscription="in-order",topic="orders"}} ' \
        f'{float(len(produced[1]))}' in metrics
    # A tampered body does not verify with the same header.
    r0 = reqs[0]
    assert not check_signature(SECRET, r0.headers["tidelog-signature"], r0.raw.replace(b"orders", b"ordery"))
    assert not check_signature("another-secret-entirely", r0.headers["tidelog-signature"], r0.raw)


def test_a_receiver_failing_n_times_then_recovering_gets_everything_without_gap(
    shared_push_node: NodeProcess, receiver_factory: Callable[..., Receiver]
) -> None:
    rc = receiver_factory(fail_first=5, fail_status=500)
    _topic(shared_push_node, "flaky")
    create_subscription(shared_push_node.url, id="flaky", topic="flaky", url=rc.url, start="earliest",
                        batch_size=10, max_attempts=50, **FAST_RETRY)
    for i in range(10):
        produce(shared_push_node.url, "flaky", [f"{i}-{j}" for j in range(10)], partition=0)
    got = rc.wait_offsets(0, 100)
    assert got == list(range(100)), "the retried batch came out of order or with a gap"
    failed = [r for r in rc.requests if r.status >= 300]
    assert len(failed) == 5
    # Every failed attempt was the same batch, retried until it succeeded.
    assert len({r.body["delivery_id"] for r in failed}) == 1
    assert [r.headers["tidelog-attempt"] for r in failed] == ["1", "2", "3", "4", "5"]
    st = wait_status(shared_push_node.url, "flaky", lambda s: s["status"]["lag"] == 0, what="caught up")["status"]
    assert st["dead_lettered"] == 0 and st["attempts"] == 0 and st["state"] == "active"
    assert st["partitions"][0]["failures"] == 5
    assert st["last_error"].startswith("HTTP 500")


def test_a_permanently_failing_receiver_fills_the_dead_letter_topic(
    shared_push_node: NodeProcess, receiver_factory: Callable[..., Receiver]
) -> None:
    rc = receiver_factory(fail_always=True)
    _topic(shared_push_node, "doomed")
    sub = create_subscription(shared_push_node.url, id="doomed", topic="doomed", url=rc.url, start="earliest",
                              batch_size=7, max_attempts=3, **FAST_RETRY)
    assert sub["dead_letter_topic"] == "doomed.dlq.doomed"
    values = [{"n": i} for i in range(30)]
    with shared_push_node.client() as c:
        c.produce("doomed", [{"key": f"k{i}", "value": v, "headers": {"h": str(i)}}
                             for i, v in enumerate(values)], partition=0)
    st = wait_status(shared_push_node.url, "doomed", lambda s: s["status"]["dead_lettered"] == 30,
                     what="30 dead-lettered")["status"]
    assert st["delivered"] == 0 and st["lag"] == 0 and st["partitions"][0]["cursor"] == 30
    assert "HTTP 503" in st["last_error"]
    with httpx.Client(base_url=shared_push_node.url) as h:
        dlq = read_all(h, "doomed.dlq.doomed", 0)
    assert [r["value"] for r in dlq] == values, "dead letters lost or reordered"
    for i, r in enumerate(dlq):
        assert r["key"] == f"k{i}"
        assert r["headers"]["h"] == str(i)
        assert r["headers"]["tidelog-dlq-topic"] == "doomed"
        assert r["headers"]["tidelog-dlq-partition"] == "0"
        assert r["headers"]["tidelog-dlq-offset"] == str(i)
        assert r["headers"]["tidelog-dlq-attempts"] == "3"
        assert r["headers"]["tidelog-dlq-error"].startswith("HTTP 503")
    # 30 records in batches of 7 → 5 batches, 3 attempts each, nothing more.
    assert len(rc.requests) == 15


def test_max_age_dead_letters_a_batch_before_max_attempts(
    shared_push_node: NodeProcess, receiver_factory: Callable[..., Receiver]
) -> None:
    rc = receiver_factory(fail_always=True)
    _topic(shared_push_node, "aged")
    create_subscription(shared_push_node.url, id="aged", topic="aged", url=rc.url, start="earliest",
                        max_attempts=1000, max_age_ms=300, retry_backoff_ms=50, retry_backoff_max_ms=100)
    produce(shared_push_node.url, "aged", [1, 2, 3], partition=0)
    wait_status(shared_push_node.url, "aged", lambda s: s["status"]["dead_lettered"] == 3, what="dead-lettered by age")
    assert len(rc.requests) < 1000


def test_a_receiver_slower_than_timeout_ms_counts_as_a_failure(
    shared_push_node: NodeProcess, receiver_factory: Callable[..., Receiver]
) -> None:
    rc = receiver_factory(delay_s=1.0)
    _topic(shared_push_node, "slowpoke")
    create_subscription(shared_push_node.url, id="slowpoke", topic="slowpoke", url=rc.url, start="earliest",
                        timeout_ms=100, max_attempts=2, **FAST_RETRY)
    produce(shared_push_node.url, "slowpoke", ["x"], partition=0)
    st = wait_status(shared_push_node.url, "slowpoke", lambda s: s["status"]["dead_lettered"] == 1,
                     what="dead-lettered after two timeouts")["status"]
    assert st["last_error"] == "timed out after 0.1 s" and st["partitions"][0]["failures"] == 2


def test_pause_stops_delivery_and_resume_continues_from_the_cursor(
    shared_push_node: NodeProcess, receiver_factory: Callable[..., Receiver]
) -> None:
    rc = receiver_factory()
    _topic(shared_push_node, "pausing")
    create_subscription(shared_push_node.url, id="p", topic="pausing", url=rc.url, start="earliest")
    produce(shared_push_node.url, "pausing", list(range(10)), partition=0)
    rc.wait_offsets(0, 10)
    r = httpx.post(f"{shared_push_node.url}/v1/subscriptions/p/pause")
    assert r.status_code == 200 and r.json()["paused"] is True and r.json()["status"]["state"] == "paused"
    produce(shared_push_node.url, "pausing", list(range(10, 20)), partition=0)
    st = wait_status(shared_push_node.url, "p", lambda s: s["status"]["partitions"][0]["cursor"] == 10
                     and s["status"]["partitions"][0]["delivering_here"] is False, what="paused at 10")
    assert st["status"]["delivered"] == 10
    assert rc.offsets(0) == list(range(10)), "delivered while paused"
    r = httpx.post(f"{shared_push_node.url}/v1/subscriptions/p/resume")
    assert r.status_code == 200 and r.json()["paused"] is False
    assert rc.wait_offsets(0, 20) == list(range(20))


def test_start_latest_skips_records_produced_before_the_subscription(
    shared_push_node: NodeProcess, receiver_factory: Callable[..., Receiver]
) -> None:
    rc = receiver_factory()
    _topic(shared_push_node, "late")
    produce(shared_push_node.url, "late", list(range(5)), partition=0)
    create_subscription(shared_push_node.url, id="late", topic="late", url=rc.url)  # start defaults to latest
    wait_status(shared_push_node.url, "late", lambda s: s["status"]["partitions"][0]["cursor"] == 5, what="cursor at 5")
    produce(shared_push_node.url, "late", list(range(5, 8)), partition=0)
    wait_status(shared_push_node.url, "late", lambda s: s["status"]["delivered"] == 3, what="3 delivered")
    assert rc.offsets(0) == [5, 6, 7]
    assert rc.values(0) == {5: 5, 6: 6, 7: 7}


def test_subscription_api_lists_describes_refuses_and_deletes(
    shared_push_node: NodeProcess, receiver_factory: Callable[..., Receiver]
) -> None:
    rc = receiver_factory()
    _topic(shared_push_node, "api", partitions=3)
    body = {"id": "api-1", "topic": "api", "url": rc.url, "partitions": [2, 0], "secret": SECRET}
    first = httpx.post(f"{shared_push_node.url}/v1/subscriptions", json=body)
    assert first.status_code == 201, first.text
    assert first.json()["partitions"] == [0, 2]
    again = httpx.post(f"{shared_push_node.url}/v1/subscriptions", json=body)
    assert again.status_code == 200, "the same create again is idempotent"
    other = httpx.post(f"{shared_push_node.url}/v1/subscriptions", json={**body, "batch_size": 5})
    assert_problem(other, 409, "SUBSCRIPTION_EXISTS")
    generated = create_subscription(shared_push_node.url, topic="api", url=rc.url)
    assert generated["id"].startswith("sub-")
    listed = httpx.get(f"{shared_push_node.url}/v1/subscriptions", params={"topic": "api"}).json()["subscriptions"]
    assert {s["id"] for s in listed} == {"api-1", generated["id"]}
    assert all("secret" not in s for s in listed)
    one = subscription(shared_push_node.url, "api-1")
    assert [p["partition"] for p in one["status"]["partitions"]] == [0, 2]
    base = {"topic": "api", "url": rc.url}
    for bad, status, code in [
        ({**base, "topic": "nope"}, 404, "TOPIC_NOT_FOUND"),
        ({**base, "partitions": [3]}, 404, "PARTITION_NOT_FOUND"),
        ({**base, "id": "bad/id"}, 400, "INVALID_REQUEST"),
        ({**base, "url": "ftp://127.0.0.1/x"}, 400, "INVALID_TARGET"),
        ({**base, "url": "not a url"}, 400, "INVALID_TARGET"),
        ({**base, "batch_size": 0}, 400, "INVALID_REQUEST"),
        ({**base, "secret": "short"}, 400, "INVALID_REQUEST"),
        ({**base, "headers": {"Tidelog-Signature": "x"}}, 400, "INVALID_REQUEST"),
        ({**base, "headers": {"Host": "x"}}, 400, "INVALID_REQUEST"),
        ({**base, "unknown": 1}, 400, "INVALID_REQUEST"),
        ({**base, "start": -1}, 400, "INVALID_REQUEST"),
        ({**base, "dead_letter_topic": "api"}, 400, "INVALID_REQUEST"),
    ]:
        assert_problem(httpx.post(f"{shared_push_node.url}/v1/subscriptions", json=bad), status, code)
    assert_problem(httpx.post(f"{shared_push_node.url}/v1/subscriptions", content=b"{not json"), 400, "INVALID_REQUEST")
    assert_problem(httpx.get(f"{shared_push_node.url}/v1/subscriptions/none"), 404, "SUBSCRIPTION_NOT_FOUND")
    assert_problem(httpx.post(f"{shared_push_node.url}/v1/subscriptions/none/pause"), 404, "SUBSCRIPTION_NOT_FOUND")
    assert httpx.delete(f"{shared_push_node.url}/v1/subscriptions/api-1").status_code == 204
    assert_problem(httpx.delete(f"{shared_push_node.url}/v1/subscriptions/api-1"), 404, "SUBSCRIPTION_NOT_FOUND")
    # Deleting the topic deletes its subscriptions.
    with shared_push_node.client() as c:
        c.delete_topic("api")
    assert httpx.get(f"{shared_push_node.url}/v1/subscriptions", params={"topic": "api"}).json()["subscriptions"] == []


def test_a_node_killed_mid_delivery_resumes_from_the_cursor_after_restart(
    push_node: NodeProcess, receiver_factory: Callable[..., Receiver]
) -> None:
    """Nothing is lost; duplicates are only records at or after the cursor committed
    before the kill (the at-least-once window)."""
    rc = receiver_factory(delay_s=0.01)
    _topic(push_node, "crash")
    with push_node.client() as c:
        for i in range(20):
            c.produce("crash", [{"value": i * 100 + j} for j in range(100)], partition=0)
    create_subscription(push_node.url, id="crash", topic="crash", url=rc.url, start="earliest", batch_size=10)
    committed = wait_status(push_node.url, "crash",
                            lambda s: 200 <= s["status"]["partitions"][0]["committed_cursor"] < 2000,
                            what="a committed cursor mid-delivery")
    committed_cursor = committed["status"]["partitions"][0]["committed_cursor"]
    push_node.kill()
    wait_until(rc.idle, what="requests in flight at the kill answered")
    before = len(rc.offsets(0))
    push_node.start()
    got = rc.wait_offsets(0, 2000, timeout_s=60)
    counts = Counter(got)
    dups = sorted(o for o, n in counts.items() if n > 1)
    assert all(n <= 2 for n in counts.values()), "a record arrived more than twice after one restart"
    # The restarted node resumed at its last committed cursor: the first offset it sent
    # after the restart is the only place a duplicate run can start, and it is contiguous.
    resumed_at = got[before] if before < len(got) else 2000
    assert resumed_at >= committed_cursor, "resumed before a cursor that was already committed"
    assert dups == list(range(resumed_at, resumed_at + len(dups))), "duplicates outside the redelivery window"
    assert len(dups) <= before, "more duplicates than records delivered before the kill"
    st = wait_status(push_node.url, "crash", lambda s: s["status"]["lag"] == 0, what="caught up")["status"]
    assert st["partitions"][0]["cursor"] == 2000
    print(f"restart: {len(dups)} duplicates of 2000 records (resumed at offset {resumed_at})")


def test_a_clean_restart_commits_the_final_cursor_and_redelivers_nothing(
    push_node: NodeProcess, receiver_factory: Callable[..., Receiver]
) -> None:
    rc = receiver_factory(delay_s=0.01)
    _topic(push_node, "clean")
    with push_node.client() as c:
        c.produce("clean", [{"value": i} for i in range(1000)], partition=0)
    create_subscription(push_node.url, id="clean", topic="clean", url=rc.url, start="earliest", batch_size=10)
    wait_status(push_node.url, "clean", lambda s: s["status"]["partitions"][0]["cursor"] >= 200, what="delivering")
    push_node.stop()  # SIGTERM: the worker stops and its cursor is committed on the way out
    wait_until(rc.idle, what="requests in flight answered")
    before = rc.offsets(0)
    push_node.start()
    got = rc.wait_offsets(0, 1000)
    assert got == list(range(1000)), f"redelivered after a clean stop from {got[len(before)]}"


def test_loopback_and_private_targets_are_refused_by_default(shared_node: NodeProcess) -> None:
    node = shared_node  # default settings: no allowed networks
    with Client(node.url) as c:
        c.create_topic("ssrf")
    for url in [
        "http://127.0.0.1:9/x", "http://localhost:9/x", "http://[::1]:9/x", "http://10.1.2.3/x",
        "http://192.168.0.1/x", "http://172.16.0.1/x", "http://169.254.169.254/latest/meta-data",
        "http://[::ffff:127.0.0.1]/x", "http://0.0.0.0/x", "http://224.0.0.1/x", "http://100.64.0.1/x",
        "http://[fe80::1]/x", "http://[fd00::1]/x", "http://2130706433/x",
    ]:
        r = httpx.post(f"{node.url}/v1/subscriptions", json={"topic": "ssrf", "url": url})
        assert_problem(r, 400, "TARGET_NOT_ALLOWED")
    assert httpx.get(f"{node.url}/v1/subscriptions").json()["subscriptions"] == []


def test_a_loopback_target_is_allowed_when_configured_and_checked_again_at_delivery(
    push_node: NodeProcess, receiver_factory: Callable[..., Receiver]
) -> None:
    """Created while 127.0.0.0/8 was allowed; after a restart without that setting, the
    delivery-time check refuses to connect (the same path DNS rebinding would take)."""
    rc = receiver_factory()
    _topic(push_node, "recheck")
    create_subscription(push_node.url, id="recheck", topic="recheck", url=rc.url, start="earliest",
                        max_attempts=1000, **FAST_RETRY)
    produce(push_node.url, "recheck", [1], partition=0)
    rc.wait_offsets(0, 1)
    push_node.stop()
    push_node.env = {k: v for k, v in push_node.env.items() if k != "TIDELOG_WEBHOOK_ALLOWED_NETWORKS"}
    push_node.start()
    produce(push_node.url, "recheck", [2], partition=0)
    st = wait_status(push_node.url, "recheck", lambda s: (s["status"]["last_error"] or "").startswith(
        "target refused"), what="refused at delivery")["status"]
    assert "not a public unicast address" in st["last_error"] and st["state"] == "failing"
    assert rc.offsets(0) == [0], "the refused target was contacted"
    assert PUSH_ENV["TIDELOG_WEBHOOK_ALLOWED_NETWORKS"] == "127.0.0.0/8"


def test_patch_moves_delivery_to_a_new_target_and_keeps_the_cursor(
    shared_push_node: NodeProcess, receiver_factory: Callable[..., Receiver]
) -> None:
    old, new = receiver_factory(), receiver_factory(secret=SECRET)
    _topic(shared_push_node, "moving")
    create_subscription(shared_push_node.url, id="mv", topic="moving", url=old.url, start="earliest", batch_size=5)
    produce(shared_push_node.url, "moving", list(range(10)), partition=0)
    old.wait_offsets(0, 10)
    wait_status(shared_push_node.url, "mv", lambda s: s["status"]["partitions"][0]["committed_cursor"] == 10,
                what="cursor 10 committed")
    r = httpx.patch(f"{shared_push_node.url}/v1/subscriptions/mv",
                    json={"url": new.url, "secret": SECRET, "batch_size": 3, "headers": {"X-New": "1"}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["url"] == new.url and body["batch_size"] == 3 and body["secret_set"] is True
    produce(shared_push_node.url, "moving", list(range(10, 20)), partition=0)
    wait_until(lambda: len(new.offsets(0)) >= 10, timeout_s=30, what="10 records at the new target")
    assert new.offsets(0) == list(range(10, 20))  # from the cursor: nothing before it again
    assert all(r.signature_ok and len(r.body["records"]) <= 3 and r.headers["x-new"] == "1"
               for r in new.accepted())
    assert old.offsets(0) == list(range(10))
    # What a subscription is cannot change in place; a refused patch changes nothing.
    for bad in ({"topic": "other"}, {"start": "latest"}, {"batch_size": 0}, {"url": "ftp://x"}, [1]):
        assert httpx.patch(f"{shared_push_node.url}/v1/subscriptions/mv", json=bad).status_code == 400, bad
    assert subscription(shared_push_node.url, "mv")["url"] == new.url
    assert_problem(httpx.patch(f"{shared_push_node.url}/v1/subscriptions/nope", json={"batch_size": 2}), 404,
                   "SUBSCRIPTION_NOT_FOUND")
