"""Send typed events as a producer outside the provider does: Microsoft's unmodified encoders and the plain SDK.

``python typed_producer.py ENDPOINT_PICKLE CONNECTION_STRING EVENTS_JSON`` registers the schemas it is given
(``auto_register``), encodes each row with ``AvroEncoder`` or ``JsonSchemaEncoder`` (``message_type=EventData``:
the schema id in the content type) and sends the events in order, one batch per partition. An event's ``kind``:

- ``avro`` / ``json``: the row encoded against ``schema`` (a definition of that format);
- ``corrupt``: the row encoded as ``avro``, then its content cut to its first two bytes (same content type);
- ``unknown``: an ``avro/binary`` content type naming a schema id the registry does not have;
- ``plain``: the row as JSON text, no content type (an event as before typed events).

A row's value ``{"$decimal": "12.34"}``, ``{"$datetime": ISO 8601}``, ``{"$date": ISO 8601}``, ``{"$time": ISO 8601}``
or ``{"$bytes": base64}`` is given to the encoder as the ``Decimal``, ``datetime``, ``date``, ``time`` or ``bytes``
that Avro's types take, at any depth of the row.

Prints ``{"ids": [schema id or null per event]}``.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import pickle
import sys
from pathlib import Path

from azure.eventhub import EventData, EventHubProducerClient
from azure.schemaregistry.encoder.avroencoder import AvroEncoder
from azure.schemaregistry.encoder.jsonencoder import JsonSchemaEncoder

UNKNOWN_ID = "0" * 32


REVIVE = {"$decimal": decimal.Decimal, "$datetime": datetime.datetime.fromisoformat, "$date": datetime.date.fromisoformat,
          "$time": datetime.time.fromisoformat, "$bytes": base64.b64decode}


def revived(value):
    """``value`` with each tagged value, at any depth, as the Python value it stands for (``REVIVE``)."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in REVIVE:
        return REVIVE[next(iter(value))](next(iter(value.values())))
    if isinstance(value, dict):
        return {name: revived(v) for name, v in value.items()}
    if isinstance(value, list):
        return [revived(v) for v in value]
    return value


def main(endpoint_file: str, conn_str: str, events_file: str) -> None:
    registry = pickle.loads(Path(endpoint_file).read_bytes())
    events = json.loads(Path(events_file).read_text())
    by_partition: dict[str, list[EventData]] = {}
    ids: list[str | None] = []
    with registry.client() as client:
        for item in events:
            kind, row = item["kind"], revived(item["row"])
            if kind in ("avro", "corrupt"):
                encoder = AvroEncoder(client=client, group_name=item["group"], auto_register=True)
                event = encoder.encode(row, schema=json.dumps(item["schema"]), message_type=EventData)
                if kind == "corrupt":
                    event = EventData(b"".join(event.body)[:2])
                    event.content_type = encoder.encode(row, schema=json.dumps(item["schema"]))["content_type"]
            elif kind == "json":
                schema = item["schema"]
                props = client.register_schema(item["group"], schema["title"], json.dumps(schema), "Json")
                event = JsonSchemaEncoder(client=client, validate=schema["$schema"]).encode(
                    row, schema_id=props.id, message_type=EventData)
            elif kind == "unknown":
                event = EventData(b"\x02\x04")
                event.content_type = f"avro/binary+{UNKNOWN_ID}"
            else:
                event = EventData(json.dumps(row))
            ids.append(event.content_type.rpartition("+")[2] if event.content_type else None)
            by_partition.setdefault(str(item["partition"]), []).append(event)
    with EventHubProducerClient.from_connection_string(conn_str) as producer:
        for partition_id, batch_events in by_partition.items():
            batch = producer.create_batch(partition_id=partition_id)
            for event in batch_events:
                batch.add(event)
            producer.send_batch(batch)
    print(json.dumps({"ids": ids}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
