"""Option parsing for the ``tidelog`` Spark data source.

Spark hands every option over as a string in a case-insensitive map. They are
parsed once, on the driver, into a frozen :class:`ReadOptions` /
:class:`WriteOptions`, so a typo fails the query before any task starts and the
executors get plain, picklable values. Names follow Spark's Kafka source where
a Kafka option has the same meaning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

EARLIEST = -2
"""Per-partition sentinel in offset JSON: the partition's log start offset (as in Kafka)."""
LATEST = -1
"""Per-partition sentinel in offset JSON: the partition's visible end (high watermark)."""

OffsetSpec = str | dict[str, dict[int, int]]
"""``"earliest"``, ``"latest"`` or ``{topic: {partition: offset}}`` with -2/-1 sentinels."""

Isolation = Literal["committed", "uncommitted"]
ValueFormat = Literal["auto", "json", "text"]


class OptionError(ValueError):
    """A bad option value; the message names the option and what it accepts."""


def _get(options: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive lookup: Spark lowercases keys, direct callers may not."""
    if name in options:
        return options[name]
    low = name.lower()
    for k, v in options.items():
        if k.lower() == low:
            return v
    return None


def bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    v = raw.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, not {raw!r}")


def _int(options: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        v = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, not {raw!r}") from None
    if v < minimum:
        raise OptionError(f"option {name} must be >= {minimum}, not {v}")
    return v


def _servers(options: Mapping[str, str]) -> tuple[str, ...]:
    raw = _get(options, "servers")
    if not raw:
        raise OptionError("option servers is required: comma-separated node URLs, "
                          "e.g. http://127.0.0.1:8080")
    urls = tuple(u.strip().rstrip("/") for u in raw.split(",") if u.strip())
    for u in urls:
        if not u.startswith(("http://", "https://")):
            raise OptionError(f"option servers: {u!r} is not an http(s) URL")
    return urls


def _topics(options: Mapping[str, str], required: bool) -> tuple[str, ...]:
    raw = _get(options, "topic")
    if not raw:
        if required:
            raise OptionError("option topic is required (one topic or several, comma-separated)")
        return ()
    topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
    if not topics:
        raise OptionError(f"option topic has no topic names: {raw!r}")
    return topics


def parse_offset_spec(
    raw: str | None, name: str, default: str, topics: tuple[str, ...]
) -> OffsetSpec:
    """Parse ``startingOffsets`` / ``endingOffsets``.

    JSON keys are validated against the subscribed topics here (on the driver)
    so a misspelt topic fails loudly instead of silently reading nothing.
    Returns ``"earliest"``, ``"latest"`` or ``{topic: {partition: offset}}``.
    """
    if raw is None:
        return default
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        doc: Any = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise OptionError(
            f"option {name} must be 'earliest', 'latest' or JSON like "
            f'{{"topic":{{"0":23,"1":-2}}}}, not {raw!r}'
        ) from None
    if not isinstance(doc, dict):
        raise OptionError(f"option {name}: JSON must be an object of topics, not {text!r}")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in doc.items():
        if topic not in topics:
            raise OptionError(f"option {name} names topic {topic!r}, which is not in option "
                              f"topic ({', '.join(topics)})")
        if not isinstance(parts, dict):
            raise OptionError(f"option {name}: {topic!r} must map partitions to offsets")
        per: dict[int, int] = {}
        for p, off in parts.items():
            try:
                pn = int(p)
            except ValueError:
                raise OptionError(f"option {name}: partition {p!r} of {topic!r} is not an integer"
                                  ) from None
            if not isinstance(off, int) or isinstance(off, bool) or off < EARLIEST:
                raise OptionError(f"option {name}: offset of {topic}/{pn} must be an integer >= -2 "
                                  f"(-2 earliest, -1 latest), not {off!r}")
            per[pn] = off
        out[topic] = per
    return out


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """Everything a reader needs, parsed and validated (picklable)."""

    servers: tuple[str, ...]
    topics: tuple[str, ...]
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp_ms: int | None
    max_records_per_trigger: int | None
    max_records_per_partition: int
    fetch_max_records: int
    isolation: Isolation
    include_headers: bool
    fail_on_data_loss: bool
    timeout_s: float
    ending_given: bool

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> ReadOptions:
        topics = _topics(options, required=True)
        iso = (_get(options, "isolation") or "committed").strip().lower()
        if iso not in ("committed", "uncommitted"):
            raise OptionError(f"option isolation must be committed or uncommitted, not {iso!r}")
        ending_raw = _get(options, "endingOffsets")
        if streaming and ending_raw is not None:
            raise OptionError("option endingOffsets is for batch queries only "
                              "(use Trigger.AvailableNow to stop a stream at the current end)")
        ending = parse_offset_spec(ending_raw, "endingOffsets", "latest", topics)
        if ending == "earliest" or (
            isinstance(ending, dict)
            and any(o == EARLIEST for m in ending.values() for o in m.values())
        ):
            raise OptionError("option endingOffsets cannot be earliest (-2): it would read nothing")
        max_trigger = _int(options, "maxRecordsPerTrigger", None, 1)
        if max_trigger is None:  # Kafka's spelling for the same limit
            max_trigger = _int(options, "maxOffsetsPerTrigger", None, 1)
        return cls(
            servers=_servers(options),
            topics=topics,
            starting=parse_offset_spec(_get(options, "startingOffsets"), "startingOffsets",
                                       "latest" if streaming else "earliest", topics),
            ending=ending,
            starting_timestamp_ms=_int(options, "startingTimestamp", None, 0),
            max_records_per_trigger=max_trigger,
            max_records_per_partition=_int(options, "maxRecordsPerPartition", 100_000, 1) or 1,
            fetch_max_records=_int(options, "fetchMaxRecords", 5_000, 1) or 1,
            isolation=iso,  # type: ignore[arg-type]
            include_headers=bool_option(options, "includeHeaders", False),
            fail_on_data_loss=bool_option(options, "failOnDataLoss", True),
            timeout_s=(_int(options, "timeoutMs", 30_000, 1) or 30_000) / 1000,
            ending_given=ending_raw is not None,
        )


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """Producer settings for the writers (picklable)."""

    servers: tuple[str, ...]
    topic: str | None
    acks: str
    batch_size: int
    timeout_ms: int
    value_format: ValueFormat
    retries: int

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        topics = _topics(options, required=False)
        if len(topics) > 1:
            raise OptionError("option topic names one topic when writing "
                              "(use a topic column to write to several)")
        acks = (_get(options, "acks") or "all").strip().lower()
        if acks not in ("all", "leader"):
            raise OptionError(f"option acks must be all or leader, not {acks!r} "
                              "(acks=none would make the commit counts meaningless)")
        fmt = (_get(options, "valueFormat") or "auto").strip().lower()
        if fmt not in ("auto", "json", "text"):
            raise OptionError(f"option valueFormat must be auto, json or text, not {fmt!r}")
        return cls(
            servers=_servers(options),
            topic=topics[0] if topics else None,
            acks=acks,
            batch_size=_int(options, "batchSize", 1000, 1) or 1000,
            # Below the nodes' forward timeout (30 s), so a slow commit comes back as the
            # leader's 504 TIMEOUT rather than a forwarding node's 503.
            timeout_ms=_int(options, "timeoutMs", 10_000, 1) or 10_000,
            value_format=fmt,  # type: ignore[arg-type]
            retries=_int(options, "retries", 5, 0) or 0,
        )
