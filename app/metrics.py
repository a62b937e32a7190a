"""Prometheus metrics, one registry per node (tests run several nodes).

Per-partition gauges are computed at scrape time by a collector rather than
updated on every append, so the produce path pays for a counter increment
only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from app.node import Node


class _PartitionCollector(Collector):
    def __init__(self, node: Node) -> None:
        self.node = node

    def collect(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        hw = GaugeMetricFamily("tidelog_partition_high_watermark", "High watermark", labels=labels)
        leo = GaugeMetricFamily("tidelog_partition_log_end_offset", "Log end offset", labels=labels)
        lso = GaugeMetricFamily(
            "tidelog_partition_log_start_offset", "Log start offset", labels=labels
        )
        size = GaugeMetricFamily("tidelog_partition_size_bytes", "Bytes on disk", labels=labels)
        isr = GaugeMetricFamily("tidelog_partition_isr_size", "In-sync replicas", labels=labels)
        for (t, p), r in list(self.node.partitions.items()):
            lv = [t, str(p)]
            hw.add_metric(lv, r.high_watermark)
            leo.add_metric(lv, r.log_end_offset)
            lso.add_metric(lv, r.log_start_offset)
            size.add_metric(lv, r.log.size_bytes)
            isr.add_metric(lv, r.isr_size())
        yield from (hw, leo, lso, size, isr)


class Metrics:
    def __init__(self, node: Node) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.records_produced = Counter(
            "tidelog_records_produced", "Records appended as leader", registry=r
        )
        self.bytes_produced = Counter(
            "tidelog_bytes_produced", "Request body bytes accepted by produce", registry=r
        )
        self.produce_requests = Counter(
            "tidelog_produce_requests", "Produce requests", ["outcome"], registry=r
        )
        self.fetch_requests = Counter("tidelog_fetch_requests", "Fetch requests", registry=r)
        self.records_fetched = Counter(
            "tidelog_records_fetched", "Records returned by fetch and SSE", registry=r
        )
        self.produce_latency = Histogram(
            "tidelog_produce_latency_seconds",
            "Produce request latency including acks wait",
            registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5),
        )
        self.retention_segments_deleted = Counter(
            "tidelog_retention_segments_deleted", "Segments deleted by retention", registry=r
        )
        r.register(_PartitionCollector(node))
