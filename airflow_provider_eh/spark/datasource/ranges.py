"""Reading one partition's range of events into Arrow record batches: what each Spark task of the reader runs.

A range is ``[start, end)`` of a partition's sequence numbers, fixed on the driver before the task
runs, so a task that Spark retries reads exactly the same events. The task opens one link with the
package's receiver (:class:`~airflow_provider_eh.client.partition_readers.PartitionReader`: events read straight
from their AMQP messages, checked against the SDK's ``EventData``) and turns each received batch into
an Arrow record batch of :func:`read_schema`. No Spark and no Airflow import: the classes Spark calls
(:mod:`.read_source`) hand the batches over.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_eh.client.partition_readers import PartitionReader
from airflow_provider_eh.client.received_fields import ReceivedFields, fields_of_event_data, plain
from airflow_provider_eh.errors import EventsExpiredError, IngestStalledError
from airflow_provider_eh.spark.datasource.read_options import ReadOptions

log = logging.getLogger(__name__)

#: seconds one receive call waits to fill its batch: a range's last batch is seldom full, and waits this long
RECEIVE_WAIT = 0.25


@dataclass(frozen=True)
class EventRange:
    """
    Events ``start`` to ``end - 1`` of a partition (by sequence number): one Spark task's input.

    :param partition_id: the partition.
    :param start: the first sequence number read.
    :param end: the first sequence number not read.
    """

    partition_id: str
    start: int
    end: int

    @property
    def count(self) -> int:
        return max(0, self.end - self.start)


def read_schema(options: ReadOptions) -> Any:
    """The Arrow schema of the rows: the event's fields, then the optional columns the options ask for."""
    import pyarrow as pa

    text_map = pa.map_(pa.string(), pa.string())
    fields = [pa.field("body", pa.binary()), pa.field("partition", pa.string()), pa.field("offset", pa.string()),
              pa.field("sequenceNumber", pa.int64()), pa.field("enqueuedTime", pa.timestamp("us", tz="UTC")),
              pa.field("contentType", pa.string()), pa.field("properties", text_map)]
    if options.system_properties:
        fields.append(pa.field("systemProperties", text_map))
    if options.typed is not None:
        from airflow_provider_eh.spark.datasource.typed_columns import arrow_type_of

        fields += [pa.field("decoded", arrow_type_of(options.typed.definition, options.typed.format)),
                   pa.field("decodeError", pa.string())]
    return pa.schema(fields)


def _text(value: Any) -> str | None:
    """A property value as the ``properties`` column holds it: text as it is, anything else as JSON text."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is int:
        return str(value)  # what json.dumps gives, without its encoder per value
    if kind is bool:
        return "true" if value else "false"
    return json.dumps(plain(value), sort_keys=True, separators=(",", ":"), default=str)


def _keep(_partition: str, fields: ReceivedFields) -> ReceivedFields:
    return fields


class _Batches:
    """Received events → Arrow record batches of one range's schema."""

    def __init__(self, options: ReadOptions, partition_id: str):
        import pyarrow as pa

        self.pa = pa
        self.schema = read_schema(options)
        self.partition_id = partition_id
        self.system = options.system_properties
        self.decoder = None
        if options.typed is not None:
            from airflow_provider_eh.spark.datasource.typed_columns import BodyDecoder

            self.decoder = BodyDecoder(self.schema.field("decoded").type, options.typed.format, options.typed.registry,
                                       null_on_error=options.typed.decode_errors == "null")

    def of(self, fields: Sequence[ReceivedFields], system: Sequence[dict[str, str]] | None) -> Any:
        pa = self.pa
        bodies = [f.body for f in fields]
        content_types = [f.content_type for f in fields]
        sequence_numbers = [f.sequence_number for f in fields]
        columns = [
            pa.array(bodies, pa.binary()), pa.array([self.partition_id] * len(fields), pa.string()),
            pa.array([f.offset for f in fields], pa.string()), pa.array(sequence_numbers, pa.int64()),
            pa.array([f.enqueued_time for f in fields], pa.timestamp("us", tz="UTC")),
            pa.array(content_types, pa.string()),
            pa.array([[(k, _text(v)) for k, v in f.properties.items()] for f in fields], self.schema.field("properties").type),
        ]
        if self.system:
            columns.append(pa.array([list((system or [{}] * len(fields))[i].items()) for i in range(len(fields))],
                                    self.schema.field("systemProperties").type))
        if self.decoder is not None:
            columns += list(self.decoder.column(bodies, content_types, self.partition_id, sequence_numbers))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def close(self) -> None:
        if self.decoder is not None:
            self.decoder.close()


def _system_properties(event: Any) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in (event.system_properties or {}).items():
        name = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
        text = _text(plain(value))
        if text is not None:
            found[name] = text
    return found


def read_range(options: ReadOptions, rng: EventRange) -> Iterator[Any]:
    """
    The range's events as Arrow record batches, in sequence order.

    :raises EventsExpiredError: the range's first events are gone from the hub (with ``failOnDataLoss``, the default).
    :raises IngestStalledError: no event came for ``receiveTimeout`` seconds before the range's end.
    """
    if rng.count == 0:
        return
    batches = _Batches(options, rng.partition_id)
    reader = PartitionReader(options.endpoint, options.consumer_group, rng.partition_id, rng.start - 1,
                             max_batch_size=min(options.max_batch_size, rng.count), max_wait_time=RECEIVE_WAIT,
                             prefetch=options.prefetch, convert=None if options.system_properties else _keep)
    expected = rng.start
    heard = time.monotonic()
    try:
        for received in reader.batches():
            if not received:
                if time.monotonic() - heard > options.receive_timeout:
                    raise IngestStalledError(
                        f"partition {rng.partition_id}: no event after sequence number {expected - 1} for "
                        f"{options.receive_timeout:g} s, though the range to read ends at {rng.end - 1}; check that the "
                        "consumer group may read the hub, or raise option 'receiveTimeout'")
                continue
            heard = time.monotonic()
            system = [_system_properties(e) for e in received] if options.system_properties else None
            fields = [fields_of_event_data(e) for e in received] if options.system_properties else received
            first = fields[0].sequence_number
            if first > expected:
                _lost(options, rng, expected, first)
            keep = [i for i, f in enumerate(fields) if expected <= f.sequence_number < rng.end]
            if keep:
                yield batches.of([fields[i] for i in keep], None if system is None else [system[i] for i in keep])
                expected = fields[keep[-1]].sequence_number + 1
            if fields[-1].sequence_number >= rng.end - 1:
                return
    finally:
        reader.close()
        batches.close()


def _lost(options: ReadOptions, rng: EventRange, expected: int, first: int) -> None:
    message = (f"partition {rng.partition_id}: events {expected} to {first - 1} of the range {rng.start} to "
               f"{rng.end - 1} are no longer in the hub (its retention dropped them before they were read)")
    if options.fail_on_data_loss:
        raise EventsExpiredError(message + "; start the read later (a later position, or a new checkpoint), or give "
                                           "option failOnDataLoss=false to read what is left")
    log.warning("%s; read on from %d (failOnDataLoss=false)", message, first)
