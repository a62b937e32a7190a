"""One local[2] SparkSession for the whole run, and helpers to read a node's topics.

The session is expensive (a JVM start, ~10 s) so it is session-scoped. Nodes
come from the shared harness (:class:`NodeProcess`): one per module for tests
that only need fresh topics (``shared_node`` + ``topic``), and ``node_factory``
for tests that need their own settings.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.support.node import NodeProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    pytest.importorskip("pyspark")
    # Spark starts Python workers (and the data source planner) with PYSPARK_PYTHON;
    # without it they run the system python, which lacks tidelog and pyarrow.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from app.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("tidelog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """One default node per test module: most tests only need fresh topics, not a fresh node.

    Tests that need special node settings (retention) use ``node_factory``.
    """
    n = NodeProcess(tmp_path_factory.mktemp("spark-node") / "data")
    n.start()
    yield n
    n.kill()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test (derived from its name), valid for tidelog."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:200]
