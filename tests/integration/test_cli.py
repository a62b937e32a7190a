"""The ``tidelog`` CLI as a user runs it: subprocesses against a real node."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import orjson

from tests.support.node import NodeProcess


def tidelog(node: NodeProcess, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m app.cli ARGS --url NODE`` and return the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args, "--url", node.url],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )


def ok(proc: subprocess.CompletedProcess[bytes]) -> str:
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def test_topics_lifecycle(shared_node: NodeProcess, topic_name: Callable[[], str]) -> None:
    name = topic_name()
    created = orjson.loads(
        ok(
            tidelog(
                shared_node,
                "topics",
                "create",
                name,
                "--partitions",
                "3",
                "-c",
                "retention_ms=60000",
            )
        )
    )
    assert created["name"] == name and len(created["partitions"]) == 3
    assert created["config"]["retention_ms"] == 60000
    # Same spec again is fine; a different one is refused with the stable code on stderr.
    ok(tidelog(shared_node, "topics", "create", name, "-p", "3", "-c", "retention_ms=60000"))
    conflict = tidelog(shared_node, "topics", "create", name, "-p", "1")
    assert conflict.returncode != 0 and b"TOPIC_EXISTS" in conflict.stderr

    listed = ok(tidelog(shared_node, "topics", "list"))
    assert f"{name}\tpartitions=3\trf=1" in listed.splitlines()

    described = orjson.loads(ok(tidelog(shared_node, "topics", "describe", name)))
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]

    ok(tidelog(shared_node, "topics", "delete", name))
    missing = tidelog(shared_node, "topics", "describe", name)
    assert missing.returncode != 0 and b"TOPIC_NOT_FOUND" in missing.stderr
    bad = tidelog(shared_node, "topics", "create", "bad name")
    assert bad.returncode != 0 and b"INVALID_TOPIC_NAME" in bad.stderr


def test_produce_lines_then_consume(shared_node: NodeProcess, topic_name: Callable[[], str]) -> None:
    name = topic_name()
    ok(tidelog(shared_node, "topics", "create", name))
    lines = b'plain text\n{"json": true}\n42\n\nlast line\r\n'
    proc = tidelog(shared_node, "produce", name, stdin=lines)
    ok(proc)
    assert b"produced 4 records" in proc.stderr
    out = ok(tidelog(shared_node, "consume", name, "--from", "earliest"))
    recs = [orjson.loads(line) for line in out.splitlines()]
    assert [r["value"] for r in recs] == ["plain text", {"json": True}, 42, "last line"]
    assert [r["offset"] for r in recs] == [0, 1, 2, 3]
    tail = ok(tidelog(shared_node, "consume", name, "--from", "2"))
    assert [orjson.loads(x)["value"] for x in tail.splitlines()] == [42, "last line"]
    assert ok(tidelog(shared_node, "consume", name, "--from", "latest")) == ""


def test_produce_ndjson_with_batches(shared_node: NodeProcess, topic_name: Callable[[], str]) -> None:
    name = topic_name()
    ok(tidelog(shared_node, "topics", "create", name, "-p", "2"))
    body = b"".join(
        orjson.dumps({"key": "same", "value": {"i": i}, "headers": {"n": str(i)}}) + b"\n" for i in range(25)
    )
    ok(tidelog(shared_node, "produce", name, "--ndjson", "--batch", "10", stdin=body))
    got = []
    for p in (0, 1):
        out = ok(tidelog(shared_node, "consume", name, "--partition", str(p), "--from", "earliest"))
        got += [orjson.loads(x) for x in out.splitlines()]
    # One key → one partition, in order, across three requests.
    assert [r["value"]["i"] for r in got] == list(range(25))
    assert {r["key"] for r in got} == {"same"}
    assert got[3]["headers"] == {"n": "3"}


def test_cli_reports_bad_ndjson_and_unknown_topic(shared_node: NodeProcess, topic_name: Callable[[], str]) -> None:
    name = topic_name()
    ok(tidelog(shared_node, "topics", "create", name))
    bad = tidelog(shared_node, "produce", name, "--ndjson", stdin=b'{"value": 1}\n{oops\n')
    assert bad.returncode != 0 and b"line 2" in bad.stderr
    wrong = tidelog(shared_node, "produce", name, "--ndjson", stdin=b'{"value": 1, "key": 3}\n')
    assert wrong.returncode != 0 and b"INVALID_REQUEST" in wrong.stderr
    gone = tidelog(shared_node, "produce", "no-such-topic", stdin=b"x\n")
    assert gone.returncode != 0 and b"TOPIC_NOT_FOUND" in gone.stderr
    gone = tidelog(shared_node, "consume", "no-such-topic")
    assert gone.returncode != 0 and b"TOPIC_NOT_FOUND" in gone.stderr
    assert ok(tidelog(shared_node, "consume", name)) == ""


def test_unreachable_node_is_one_line_error(shared_node: NodeProcess) -> None:
    """A down node is reported in one line with a non-zero exit, not a traceback."""
    from tests.support.node import free_port

    down = NodeProcess(shared_node.data_dir, port=free_port())  # never started
    for args in (("topics", "list"), ("consume", "x")):
        proc = tidelog(down, *args)
        assert proc.returncode == 2, proc.stderr.decode()
        assert b"Traceback" not in proc.stderr
        assert proc.stderr.decode().startswith("error: cannot reach ")
