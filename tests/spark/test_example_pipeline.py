"""The documented example pipeline, run as its README says, against a real node."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.node import NodeProcess

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _run(node: NodeProcess, ckpt: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "examples/spark_pipeline.py", "--servers", node.url,
         "--checkpoint", str(ckpt), "--available-now"],
        cwd=ROOT, env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        capture_output=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]


def _latest_totals(node: NodeProcess) -> dict[str, dict[str, object]]:
    with node.client() as c:
        latest: dict[str, dict[str, object]] = {}
        for r in c.consume("user-totals", 0):
            latest[r["key"]] = r["value"]
    return latest


def test_pipeline_keeps_running_totals_per_key_across_restarts(
    node_factory: Callable[..., NodeProcess], tmp_path: Path
) -> None:
    node = node_factory()
    events = [("ana", 12.5), ("bo", 3.0), ("ana", 7.5)]
    with node.client() as c:
        c.create_topic("events", partitions=2)
        c.produce("events", [{"key": u, "value": {"user": u, "amount": a}} for u, a in events])
    _run(node, tmp_path / "ckpt")
    assert _latest_totals(node) == {"ana": {"user": "ana", "events": 2, "amount": 20.0},
                                    "bo": {"user": "bo", "events": 1, "amount": 3.0}}

    with node.client() as c:
        c.produce("events", [{"key": "bo", "value": {"user": "bo", "amount": 1.25}},
                             {"key": "cy", "value": {"user": "cy", "amount": 2.0}}])
    _run(node, tmp_path / "ckpt")  # resumes from the checkpoint: totals include old events
    assert _latest_totals(node) == {"ana": {"user": "ana", "events": 2, "amount": 20.0},
                                    "bo": {"user": "bo", "events": 2, "amount": 4.25},
                                    "cy": {"user": "cy", "events": 1, "amount": 2.0}}
