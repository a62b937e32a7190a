"""The dashboard in headless Chromium against a real 3-node cluster.

What the page shows is read from its DOM (cells carry ``data-field``) and
compared with the public API; faults are real SIGKILLs. The page is never
reloaded: a marker set in ``window`` at the start must survive to the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from app.client import Client
from tests.browser.conftest import LAPTOP, PHONE, create_rf3, describe, eventually, leader_view
from tests.support.node import ClusterProcesses

ROW_JS = """([t, p]) => {
  const tr = document.querySelector(`tr[data-key="${t}/${p}"]`);
  if (!tr) return null;
  const o = {cls: tr.className, reps: tr.querySelectorAll("li.rep").length};
  for (const td of tr.querySelectorAll("[data-field]")) o[td.dataset.field] = td.textContent.trim();
  return o;
}"""

# Records each pushed snapshot's view of one row, so the order of changes is exact
# even when the test's polling is slower than the pushes.
RECORDER_JS = """([t, p]) => {
  window.__noReload = 1;
  window.__rows = [];
  window.__conn = [];
  const main = document.getElementById("main");
  const grab = () => {
    const tr = document.querySelector(`tr[data-key="${t}/${p}"]`);
    const f = (n) => tr && tr.querySelector(`[data-field="${n}"]`)?.textContent.trim();
    window.__rows.push({updated: Number(main.dataset.updatedMs), served: Number(main.dataset.servedBy),
                        isr: f("isr"), lrs: f("lrs"), status: f("status"), cls: tr && tr.className});
  };
  new MutationObserver(grab).observe(main, {attributes: true, attributeFilter: ["data-updated-ms"]});
  const conn = document.getElementById("conn");
  const log = () => window.__conn.push({state: conn.dataset.state, text: conn.textContent.trim()});
  new MutationObserver(log).observe(conn, {attributes: true, childList: true, subtree: true,
                                           characterData: true});
  grab();
}"""


def ids(text: str) -> list[int]:
    return [] if text in ("none", "—", "") else [int(x) for x in text.split(",")]


def offset(text: str) -> int | None:
    return None if text == "—" else int(text.replace(",", ""))


def dom_row(page: Any, topic: str, partition: int) -> dict[str, Any] | None:
    r = page.evaluate(ROW_JS, [topic, partition])
    if r is None:
        return None
    return {
        "leader": None if r["leader"] == "none" else int(r["leader"]),
        "replicas": ids(r["replicas"]), "isr": ids(r["isr"]), "lrs": ids(r["lrs"]),
        "leader_epoch": offset(r["leader-epoch"]), "partition_epoch": offset(r["partition-epoch"]),
        "high_watermark": offset(r["hw"]), "log_end_offset": offset(r["leo"]),
        "log_start_offset": offset(r["lso"]), "status": r["status"], "cls": r["cls"], "reps": r["reps"],
    }


API_FIELDS = ("leader", "replicas", "isr", "lrs", "leader_epoch", "partition_epoch",
              "high_watermark", "log_end_offset", "log_start_offset")


def shot(page: Any, d: Path, name: str) -> None:
    page.set_viewport_size(LAPTOP)
    page.screenshot(path=str(d / f"{name}-laptop.png"), full_page=True)
    page.set_viewport_size(PHONE)
    # Tables scroll inside their own regions: the page itself must not scroll sideways.
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"] + 1, f"{name}: page is {width}px wide at phone width"
    page.screenshot(path=str(d / f"{name}-phone.png"), full_page=True)
    page.set_viewport_size(LAPTOP)


def live(page: Any, served_by: int | None = None) -> None:
    page.wait_for_selector('#conn[data-state="live"]')
    if served_by is not None:
        eventually(lambda: page.get_attribute("#main", "data-served-by") == str(served_by),
                   what=f"page fed by node {served_by}")


def test_table_shows_the_apis_isr_hw_and_leo(
    cluster: ClusterProcesses, browser_context: Any, screenshot_dir: Path
) -> None:
    create_rf3(cluster, "orders", 3)
    with Client(cluster.node(1).url) as cl:
        for p in range(3):
            for i in range(3):
                cl.produce("orders", [{"value": {"n": i, "k": j}} for j in range(10)], partition=p)
    # Served by node 2: some partitions are led elsewhere, so their offsets come from
    # the aggregation (the leaders' own reports), not from node 2's replicas.
    node = cluster.node(2)
    page = browser_context.new_page()
    page.goto(node.url + "/")
    live(page, 2)
    page.evaluate("window.__noReload = 1")
    assert page.locator("#conn[aria-live]").count() == 1
    assert page.locator("table caption").count() >= 2
    assert page.locator('th[scope="col"]').count() > 10
    # Keyboard: the first Tab reaches the skip link, and focus is visibly outlined.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.classList.contains('skip')")
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") == "solid"
    page.evaluate("document.activeElement.blur()")

    for p in range(3):
        def same(p: int = p) -> dict[str, Any] | None:
            api = describe(node.url, "orders", p)
            ui = dom_row(page, "orders", p)
            ok = ui is not None and all(ui[k] == api[k] for k in API_FIELDS)
            return api if ok else None

        api = eventually(same, what=f"row orders/{p} equal to GET /v1/topics/orders/partitions/{p}")
        assert api["high_watermark"] == api["log_end_offset"] == 30
        assert sorted(api["isr"]) == sorted(api["lrs"]) == [1, 2, 3]
        own = eventually(lambda p=p: leader_view(cluster, "orders", p), what="the leader's own view")
        assert (own["high_watermark"], own["log_end_offset"]) == (30, 30)
        ui = dom_row(page, "orders", p)
        assert ui is not None and ui["reps"] == 3 and "online" in ui["status"]
    shot(page, screenshot_dir, "overview")

    # The partition page: merged history from every broker, the leader's samples.
    page.goto(node.url + "/topics/orders/partitions/0")
    live(page, 2)
    page.wait_for_selector("#evt tbody tr")
    assert "Leader change" in page.inner_text("#evt tbody")
    with Client(cluster.node(3).url) as cl:
        cl.produce("orders", [{"value": i} for i in range(20)], partition=0)
    eventually(lambda: "High watermark, last" in page.inner_text("#sparks")
               and "now 50" in page.inner_text("#sparks"), what="HW sparkline reaching 50")
    assert page.locator("#sparks svg polyline").count() == 3
    hw = page.inner_text('#pfacts [data-field="high-watermark"]')
    assert offset(hw) == 50
    shot(page, screenshot_dir, "partition")


def test_killed_follower_leaves_lrs_then_isr_and_comes_back_without_reload(
    cluster: ClusterProcesses, browser_context: Any, screenshot_dir: Path
) -> None:
    create_rf3(cluster, "kf", 1)
    state = eventually(lambda: leader_view(cluster, "kf", 0), what="a leader")
    leader = state["leader"]
    victim, watcher = (n for n in cluster.nodes if n.node_id != leader)
    page = browser_context.new_page()
    page.goto(watcher.url + "/")
    live(page, watcher.node_id)
    eventually(lambda: (r := dom_row(page, "kf", 0)) and len(r["lrs"]) == 3 and len(r["isr"]) == 3,
               what="full ISR and LRS on the page")
    page.evaluate(RECORDER_JS, ["kf", 0])
    detail = browser_context.new_page()
    detail.goto(f"{watcher.url}/topics/kf/partitions/0")
    live(detail, watcher.node_id)

    victim.kill()
    with Client(cluster.node(leader).url) as cl:  # new data the dead follower cannot fetch
        cl.produce("kf", [{"value": "after-kill"}], partition=0, acks="leader")

    def first(cond: Any) -> int | None:
        rows = page.evaluate("window.__rows")
        return next((r["updated"] for r in rows if r["isr"] is not None and cond(r)), None)

    v = victim.node_id
    out_of_isr = eventually(
        lambda: first(lambda r: v not in ids(r["isr"]) and "under-replicated" in r["status"]
                      and "row-warn" in r["cls"]),
        what=f"broker {v} out of the ISR and the partition under-replicated on the page")
    out_of_lrs = first(lambda r: v not in ids(r["lrs"]))
    assert out_of_lrs is not None and out_of_lrs <= out_of_isr, page.evaluate("window.__rows")
    api = describe(watcher.url, "kf", 0)
    assert v not in api["isr"] and api["under_replicated"]
    eventually(lambda: "ISR shrink" in detail.inner_text("#evt tbody"), what="ISR shrink in the history")
    shot(page, screenshot_dir, "follower-down")
    shot(detail, screenshot_dir, "follower-down-partition")

    victim.start()
    eventually(lambda: (r := dom_row(page, "kf", 0)) and v in r["lrs"] and v in r["isr"]
               and "online" in r["status"] and "row-warn" not in r["cls"],
               what=f"broker {v} back in the LRS and ISR on the page")
    eventually(lambda: "ISR expand" in detail.inner_text("#evt tbody"), what="ISR expand in the history")
    assert page.evaluate("window.__noReload") == 1


def test_page_reconnects_to_another_broker_when_its_node_dies(
    cluster: ClusterProcesses, browser_context: Any, screenshot_dir: Path
) -> None:
    create_rf3(cluster, "rc", 1)
    doomed = cluster.node(3)
    page = browser_context.new_page()
    page.goto(doomed.url + "/")
    live(page, 3)
    page.evaluate(RECORDER_JS, ["rc", 0])

    doomed.kill()

    def lost_banner() -> dict[str, Any] | None:
        return next((c for c in page.evaluate("window.__conn")
                     if c["state"] == "lost" and "lost" in c["text"] and "reconnecting to" in c["text"]),
                    None)

    banner = eventually(lost_banner, what="the connection-lost banner")
    assert doomed.url in banner["text"], banner
    eventually(lambda: page.get_attribute("#conn", "data-state") == "live"
               and page.get_attribute("#main", "data-served-by") in ("1", "2"),
               what="the page live again from another broker")
    served = int(page.get_attribute("#main", "data-served-by") or 0)
    # It keeps updating: new snapshots arrive, and they show the dead broker fenced.
    seen = int(page.get_attribute("#main", "data-updated-ms") or 0)
    eventually(lambda: int(page.get_attribute("#main", "data-updated-ms") or 0) > seen,
               what="a newer snapshot")
    eventually(lambda: "fenced" in page.inner_text('#brokers tr[data-key="3"]'),
               what="broker 3 shown fenced")
    links = page.eval_on_selector_all("#topics a", "els => els.map(e => e.href)")
    assert links and all(h.startswith(cluster.node(served).url) for h in links), links
    assert httpx.get(f"{cluster.node(served).url}/v1/dashboard/snapshot", timeout=5) \
        .headers["access-control-allow-origin"] == "*"
    assert page.evaluate("window.__noReload") == 1
    shot(page, screenshot_dir, "reconnected")


def test_page_leaves_a_hung_node_for_another_broker(cluster: ClusterProcesses, browser_context: Any) -> None:
    """SIGSTOP: the connection stays open but nothing arrives; the page's watchdog notices."""
    create_rf3(cluster, "hung", 1)
    hung = cluster.node(2)
    page = browser_context.new_page()
    page.goto(hung.url + "/")
    live(page, 2)
    page.evaluate(RECORDER_JS, ["hung", 0])
    hung.pause()
    eventually(lambda: any(c["state"] == "lost" and hung.url in c["text"] for c in page.evaluate("window.__conn")),
               what="the connection-lost banner for the hung node")
    eventually(lambda: page.get_attribute("#conn", "data-state") == "live"
               and page.get_attribute("#main", "data-served-by") in ("1", "3"),
               what="the page live again from another broker")
    eventually(lambda: "unreachable" in page.inner_text('#brokers tr[data-key="2"]')
               or "fenced" in page.inner_text('#brokers tr[data-key="2"]'),
               what="broker 2 shown unreachable or fenced")
    assert page.evaluate("window.__noReload") == 1
    hung.resume()
