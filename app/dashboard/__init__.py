"""The admin dashboard's data: sampled history, cluster-wide partition state, snapshots.

``GET /`` and its live updates are served by ``app/api/dashboard.py``; this
package gathers what they show. Each broker reports the live state of the
partitions it leads (``/internal/v1/dashboard/state``); the serving node fans
out to the brokers with short timeouts and caches the answers briefly, so
many open dashboards do not multiply the load. The public describe routes use
the same aggregation, so they show real offsets from any node.
"""
