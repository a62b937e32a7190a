"""The dashboard's push-subscription panel, live, against a real node and real receivers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.browser.conftest import eventually
from tests.support.node import NodeProcess
from tests.support.receiver import Receiver

PANEL_JS = """(sid) => {
  const tr = document.querySelector(`#subs-t tr[data-sub="${sid}"]`);
  if (!tr) return null;
  const o = {cls: tr.className};
  for (const td of tr.querySelectorAll("[data-field]")) o[td.dataset.field] = td.textContent.trim();
  return o;
}"""


def test_panel_shows_delivery_failures_and_dead_letters_without_reload(
    node_factory: Callable[..., NodeProcess], browser_context: Any, receiver_factory: Callable[..., Receiver],
    screenshot_dir: Path,
) -> None:
    node = node_factory(env={"TIDELOG_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"})
    good, bad = receiver_factory(), receiver_factory(fail_always=True)
    with httpx.Client(base_url=node.url, timeout=30) as http:
        http.post("/v1/topics", json={"name": "orders"}).raise_for_status()
        page = browser_context.new_page()
        page.goto(node.url + "/")
        page.evaluate("window.__noReload = 1")
        eventually(lambda: "No push subscriptions" in page.inner_text("#subs"), what="empty panel")
        for sid, r, extra in (("ok", good, {}), ("broken", bad, {"max_attempts": 2})):
            resp = http.post("/v1/subscriptions", json={
                "id": sid, "topic": "orders", "url": r.url, "start": "earliest", "batch_size": 10,
                "retry_backoff_ms": 10, **extra,
            })
            assert resp.status_code == 201, resp.text
        http.post("/v1/topics/orders/records",
                  json={"records": [{"value": i} for i in range(25)]}).raise_for_status()

        ok = eventually(lambda: (row := page.evaluate(PANEL_JS, "ok")) and row["delivered"] == "25" and row,
                        what="25 delivered to the good receiver shown")
        assert ok["lag"] == "0" and "delivering" in ok["state"] and ok["dead-lettered"] == "0"
        broken = eventually(
            lambda: (row := page.evaluate(PANEL_JS, "broken")) and row["dead-lettered"].startswith("25") and row,
            what="all 25 dead-lettered for the failing receiver", timeout_s=90)
        assert "503" in broken["last-error"] and "ms ago" in broken["last-error"], broken
        assert "dead-lettered" in broken["state"] and "row-warn" in broken["cls"], broken
        assert broken["last-success"] == "—" and ok["last-success"].endswith("ms ago")
        assert int(ok["last-success"].split()[0].replace(",", "")) < 600_000
        api = http.get("/v1/subscriptions/broken").json()["status"]
        assert api["dead_lettered"] == 25 and api["delivered"] == 0
        assert page.evaluate("window.__noReload") == 1
        page.screenshot(path=str(screenshot_dir / "subscriptions-laptop.png"), full_page=True)
