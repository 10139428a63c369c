"""Where a read starts and ends in each partition: the reader's position options, parsed; no Spark, no Airflow.

A position is ``earliest``, ``latest``, a sequence number or an enqueued time. The options take them as
text (``startingPosition=earliest``) or as the JSON of the Scala connector's ``EventPosition``
(``{"offset": "-1", "seqNo": -1, "enqueuedTime": null, "isInclusive": true}``), and per partition as a
JSON object keyed by partition id (``{"0": {"seqNo": 42}}``) or by the Scala connector's
``{"ehName": "<hub>", "partitionId": 0}`` keys, so that the options of a job moving from that
connector keep working.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_provider_eh.errors import DataSourceOptionError

EARLIEST = "earliest"
LATEST = "latest"
SEQUENCE = "sequence"
TIME = "time"


@dataclass(frozen=True)
class Position:
    """
    A position in a partition.

    :param kind: :data:`EARLIEST`, :data:`LATEST`, :data:`SEQUENCE` or :data:`TIME`.
    :param sequence_number: with :data:`SEQUENCE`.
    :param enqueued_time: with :data:`TIME` (aware, UTC).
    :param inclusive: whether the event at ``sequence_number`` is included (a start: read from it; an end:
        read up to it); with :data:`TIME` an event enqueued at the time is always after the position.
    """

    kind: str
    sequence_number: int | None = None
    enqueued_time: datetime | None = None
    inclusive: bool = True


def parse_time(raw: Any, where: str) -> datetime:
    """An enqueued time: ISO 8601 text (UTC when it names no zone) or milliseconds since the epoch."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return datetime.fromtimestamp(raw / 1000, tz=UTC)
    text = str(raw).strip()
    if text.lstrip("-").isdigit():
        return datetime.fromtimestamp(int(text) / 1000, tz=UTC)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise DataSourceOptionError(f"{where}: enqueued time {text!r} is neither ISO 8601 text "
                                    "(2026-05-01T00:00:00Z) nor milliseconds since the epoch") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def parse_position(raw: Any, where: str) -> Position:
    """One position from an option's text or its JSON value; ``where`` names the option in errors."""
    if isinstance(raw, str):
        text = raw.strip()
        if text.lower() in (EARLIEST, "-1", "start"):
            return Position(EARLIEST)
        if text.lower() in (LATEST, "@latest", "end"):
            return Position(LATEST)
        if text.lstrip("-").isdigit():
            return _sequence(int(text), True, where)
        if text.startswith("{"):
            try:
                raw = json.loads(text)
            except ValueError:
                raise DataSourceOptionError(f"{where} is not JSON: {text[:80]!r}") from None
        else:
            return Position(TIME, enqueued_time=parse_time(text, where))
    if not isinstance(raw, Mapping):
        raise DataSourceOptionError(f"{where}: {raw!r} is no position; give 'earliest', 'latest', a sequence number, "
                                    "an enqueued time or {\"seqNo\": n} / {\"enqueuedTime\": \"...\"}")
    return _of_json(raw, where)


def _of_json(value: Mapping[str, Any], where: str) -> Position:
    known = {"offset", "seqno", "sequencenumber", "enqueuedtime", "isinclusive"}
    keys = {str(k).lower(): v for k, v in value.items()}
    unknown = sorted(set(keys) - known)
    if unknown:
        raise DataSourceOptionError(f"{where}: unknown key {unknown[0]!r}; a position has 'seqNo', 'enqueuedTime', "
                                    "'offset' ('-1' or '@latest') and 'isInclusive'")
    inclusive = keys.get("isinclusive")
    inclusive = True if inclusive is None else inclusive
    if not isinstance(inclusive, bool):
        raise DataSourceOptionError(f"{where}: 'isInclusive' is {inclusive!r}: give true or false")
    offset = keys.get("offset")
    if offset is not None:
        if str(offset) == "-1":
            return Position(EARLIEST)
        if str(offset) == "@latest":
            return Position(LATEST)
        raise DataSourceOptionError(f"{where}: offset {offset!r}: only '-1' (earliest) and '@latest' are taken, as "
                                    "offsets are not comparable across SDKs; give 'seqNo' or 'enqueuedTime'")
    when = keys.get("enqueuedtime")
    if when is not None:
        return Position(TIME, enqueued_time=parse_time(when, where))
    seq = keys.get("seqno", keys.get("sequencenumber"))
    if seq is None:
        raise DataSourceOptionError(f"{where}: the position names neither 'seqNo', 'enqueuedTime' nor 'offset'")
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise DataSourceOptionError(f"{where}: 'seqNo' is {seq!r}: give a whole number")
    if seq == -1:
        return Position(EARLIEST)
    return _sequence(seq, inclusive, where)


def _sequence(seq: int, inclusive: bool, where: str) -> Position:
    if seq < 0:
        raise DataSourceOptionError(f"{where}: sequence number {seq} is negative; give 0 or more, or 'earliest'")
    return Position(SEQUENCE, sequence_number=seq, inclusive=inclusive)


def partition_key(raw: str, hub: str, where: str) -> str:
    """A partition id from a per-partition map's key: ``"0"``, or the Scala connector's ``{"ehName", "partitionId"}``."""
    text = raw.strip()
    if not text.startswith("{"):
        return text
    try:
        key = json.loads(text)
        partition = key["partitionId"]
    except (ValueError, KeyError, TypeError):
        raise DataSourceOptionError(f"{where}: key {text!r} is neither a partition id nor "
                                    '{"ehName": "<hub>", "partitionId": <n>}') from None
    name = key.get("ehName")
    if name is not None and str(name) != hub:
        raise DataSourceOptionError(f"{where}: key {text!r} names hub {name!r}, but this read is of hub {hub!r}")
    return str(partition)


def parse_positions(raw: str | None, hub: str, where: str) -> dict[str, Position]:
    """A per-partition map of positions (``startingPositions``), keyed by partition id."""
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        raise DataSourceOptionError(f"option {where!r} is not JSON: give an object of partition id to position, "
                                    'e.g. {"0": {"seqNo": 42}, "1": "earliest"}') from None
    if not isinstance(value, Mapping):
        raise DataSourceOptionError(f"option {where!r} is a JSON {type(value).__name__}: give an object of partition "
                                    "id to position")
    found: dict[str, Position] = {}
    for key, position in value.items():
        partition = partition_key(str(key), hub, f"option {where!r}")
        found[partition] = parse_position(position, f"option {where!r}, partition {partition}")
    return found
