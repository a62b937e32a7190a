"""Shared fixtures: real tidelog processes on loopback."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support.node import NodeProcess
from tests.support.receiver import Receiver

# CI replays the same examples every run (a failure there is reproducible from the
# log); locally Hypothesis keeps exploring new ones.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def node_factory(tmp_path: Path) -> Iterator[Callable[..., NodeProcess]]:
    """Start nodes on demand; all are killed at teardown."""
    started: list[NodeProcess] = []

    def make(node_id: int = 1, start: bool = True, **kw: object) -> NodeProcess:
        n = NodeProcess(tmp_path / f"node{node_id}-{len(started)}", node_id=node_id, **kw)  # type: ignore[arg-type]
        started.append(n)
        return n.start() if start else n

    yield make
    for n in started:
        if n.alive:
            n.resume() if n.proc else None
            n.kill()


@pytest.fixture
def node(node_factory: Callable[..., NodeProcess]) -> NodeProcess:
    """One fresh single node with default settings."""
    return node_factory()


@pytest.fixture
def receiver_factory() -> Iterator[Callable[..., Receiver]]:
    """Real HTTP webhook receivers on loopback (threads); stopped at teardown."""
    made: list[Receiver] = []

    def make(**kw: object) -> Receiver:
        r = Receiver(**kw).start()  # type: ignore[arg-type]
        made.append(r)
        return r

    yield make
    for r in made:
        r.stop()
