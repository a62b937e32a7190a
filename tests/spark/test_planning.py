"""Planning logic without Spark or a node: option parsing, range splitting, read limits."""

from __future__ import annotations

import pytest

from app.spark.offsets import OffsetRange, PartitionInfo, cap_rows, plan_ranges, resolve
from app.spark.options import EARLIEST, LATEST, OptionError, ReadOptions, WriteOptions

pytestmark = pytest.mark.spark  # no Spark session or node, but app.spark imports pyspark


def test_read_options_defaults_follow_the_kafka_source() -> None:
    batch = ReadOptions.parse({"servers": "http://a:1, http://b:2/", "topic": "x,y,x"}, False)
    assert batch.servers == ("http://a:1", "http://b:2")
    assert batch.topics == ("x", "y")
    assert (batch.starting, batch.ending) == ("earliest", "latest")
    assert batch.isolation == "committed" and batch.fail_on_data_loss
    stream = ReadOptions.parse({"servers": "http://a:1", "topic": "x"}, True)
    assert stream.starting == "latest"


def test_offset_json_is_parsed_with_int_partitions() -> None:
    o = ReadOptions.parse({"servers": "http://a:1", "topic": "t",
                           "startingoffsets": '{"t": {"0": 5, "1": -2}}'}, False)
    assert o.starting == {"t": {0: 5, 1: EARLIEST}}


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"topic": "t"}, False, "servers is required"),
        ({"servers": "a:1", "topic": "t"}, False, "not an http"),
        ({"servers": "http://a:1"}, False, "topic is required"),
        ({"servers": "http://a:1", "topic": "t", "startingOffsets": "{"}, False, "JSON like"),
        ({"servers": "http://a:1", "topic": "t", "startingOffsets": '{"t": {"0": -3}}'},
         False, ">= -2"),
        ({"servers": "http://a:1", "topic": "t", "endingOffsets": "latest"}, True,
         "batch queries only"),
        ({"servers": "http://a:1", "topic": "t", "includeHeaders": "maybe"}, False,
         "true or false"),
    ],
)
def test_bad_read_options_name_the_option(options: dict[str, str], streaming: bool,
                                          message: str) -> None:
    with pytest.raises(OptionError, match=message):
        ReadOptions.parse(options, streaming)


def test_write_options_refuse_acks_none_and_several_topics() -> None:
    with pytest.raises(OptionError, match="acks"):
        WriteOptions.parse({"servers": "http://a:1", "topic": "t", "acks": "none"})
    with pytest.raises(OptionError, match="one topic"):
        WriteOptions.parse({"servers": "http://a:1", "topic": "t,u"})


def test_resolve_fills_unlisted_partitions_with_the_default() -> None:
    parts = {("t", 0): PartitionInfo("t", 0, 3, 10), ("t", 1): PartitionInfo("t", 1, 0, 4)}
    assert resolve({"t": {0: 5}}, parts, "x", LATEST) == {("t", 0): 5, ("t", 1): 4}
    assert resolve({"t": {1: LATEST}}, parts, "x", EARLIEST) == {("t", 0): 3, ("t", 1): 4}
    assert resolve("earliest", parts, "x", LATEST) == {("t", 0): 3, ("t", 1): 0}


def test_plan_ranges_splits_and_marks_new_partitions() -> None:
    got = plan_ranges({("t", 0): 2}, {("t", 0): 9, ("t", 1): 3}, max_records=3)
    assert got == [
        OffsetRange("t", 0, 2, 5), OffsetRange("t", 0, 5, 8), OffsetRange("t", 0, 8, 9),
        OffsetRange("t", 1, 0, 3, from_earliest=True),
    ]
    got = plan_ranges({}, {("t", 1): 10}, max_records=3, new_start={("t", 1): 5})
    assert got == [OffsetRange("t", 1, 5, 8, True), OffsetRange("t", 1, 8, 10, True)]
    assert plan_ranges({("t", 0): 4}, {("t", 0): 4}, 10) == []


def test_cap_rows_shares_the_limit_by_backlog_and_always_progresses() -> None:
    begin = {("a", 0): 0, ("a", 1): 0, ("a", 2): 10}
    end = {("a", 0): 90, ("a", 1): 10, ("a", 2): 10}
    assert cap_rows(begin, end, 10) == {("a", 0): 9, ("a", 1): 1, ("a", 2): 10}
    assert cap_rows(begin, end, 1000) == end
    small = cap_rows({("a", 0): 0, ("a", 1): 0}, {("a", 0): 5, ("a", 1): 5}, 1)
    assert sum(small.values()) == 1
