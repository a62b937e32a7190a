"""Simulator tests: ``@pytest.mark.slow`` soaks run only with ``TIDELOG_SLOW=1``."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("TIDELOG_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow soak: set TIDELOG_SLOW=1 to run")
    for item in items:
        if "slow" in item.keywords and str(item.fspath).startswith(os.path.dirname(__file__)):
            item.add_marker(skip)
