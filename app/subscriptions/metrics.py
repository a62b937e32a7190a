"""Prometheus view of the deliveries this node runs, computed at scrape time.

Only partitions delivered *here* are exported (each (subscription, partition)
appears on exactly one node, its leader), so summing a series over the
cluster's nodes counts nothing twice. Totals are gauges, not counters: they
come from the cursor state, which moves to another node on failover and
restarts there from the last committed value.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from app.subscriptions.manager import SubscriptionManager


class SubscriptionCollector(Collector):
    def __init__(self, manager: SubscriptionManager) -> None:
        self.manager = manager

    def collect(self) -> Iterator[Metric]:
        labels = ["subscription", "topic", "partition"]
        lag = GaugeMetricFamily("tidelog_subscription_lag_records", "High watermark minus cursor", labels=labels)
        cursor = GaugeMetricFamily("tidelog_subscription_cursor", "Next offset to deliver", labels=labels)
        delivered = GaugeMetricFamily(
            "tidelog_subscription_delivered_records", "Records acknowledged by the receiver", labels=labels
        )
        dead = GaugeMetricFamily(
            "tidelog_subscription_dead_lettered_records", "Records written to the dead-letter topic", labels=labels
        )
        failures = GaugeMetricFamily("tidelog_subscription_failed_requests", "Failed delivery attempts",
                                     labels=labels)
        retrying = GaugeMetricFamily(
            "tidelog_subscription_attempts", "Failed attempts of the batch being retried now", labels=labels
        )
        for (sid, p), run in list(self.manager.running.items()):
            st = run.worker.state
            lv = [sid, run.replica.topic, str(p)]
            lag.add_metric(lv, max(0, run.replica.high_watermark - st.cursor) if st.cursor >= 0 else 0)
            cursor.add_metric(lv, st.cursor)
            delivered.add_metric(lv, st.delivered)
            dead.add_metric(lv, st.dead_lettered)
            failures.add_metric(lv, st.failures)
            retrying.add_metric(lv, st.attempts)
        yield from (lag, cursor, delivered, dead, failures, retrying)
