"""The replica fetch answer's binary framing round-trips and refuses truncation."""

from __future__ import annotations

import pytest

from app.replica.wire import PartitionAnswer, decode_answers, encode_answers
from replication.core import DivergingEpoch, FetchResponse
from replication.core import messages as M


def test_answers_round_trip_with_records_errors_and_divergence() -> None:
    answers = [
        PartitionAnswer("t", 0, FetchResponse(5, 3, 2, 0, records_available=True), b"\x00\x01batch"),
        PartitionAnswer("t", 1, FetchResponse(9, -1, 4, -1, error=M.FENCED_LEADER_EPOCH), b""),
        PartitionAnswer("u", 7, FetchResponse(12, 10, 3, 0, diverging_epoch=DivergingEpoch(1, 8)), b""),
        PartitionAnswer("u", 8, FetchResponse(0, 0, 3, 0), b""),
    ]
    got = decode_answers(encode_answers(answers))
    assert [(a.topic, a.partition, a.response, bytes(a.records)) for a in got] == [
        (a.topic, a.partition, a.response, bytes(a.records)) for a in answers
    ]


def test_record_bytes_are_shipped_unchanged() -> None:
    raw = bytes(range(256)) * 10
    [a] = decode_answers(
        encode_answers([PartitionAnswer("t", 0, FetchResponse(0, 0, 0, 0, records_available=True), raw)])
    )
    assert bytes(a.records) == raw and a.response.records_available


def test_truncated_body_is_refused() -> None:
    data = encode_answers(
        [PartitionAnswer("t", 0, FetchResponse(0, 0, 0, 0, records_available=True), b"x" * 100)]
    )
    with pytest.raises(ValueError):
        decode_answers(data[:-1])
    with pytest.raises(ValueError):
        decode_answers(data[:2])
