"""The event trigger's payload: event records, a batch's payload, and reading a payload's events back.

An event record is the JSON-able view of one received event (:func:`event_record`): what a trigger's
filter receives and what ``bodies`` hold. A typed event's record (its content type names a schema id:
``avro/binary+<id>``, Microsoft's JSON Schema encoder's) also has ``content_type`` and ``schema_id``, and
as the producer reads it (:func:`decoded_record`) its ``body`` is the decoded value (a dict, made
JSON-safe: bytes as base64, times as ISO 8601, decimals as text); one that does not decode keeps its
body as text and says why in ``decode_error``. The event payload (the asset event's ``extra["payload"]``)::

    {"namespace", "eventhub", "consumer_group", "events": <count>,
     "partitions": {"0": {"first": 10, "last": 14, "count": 5[, "sequence_numbers": [...]]}, ...},
     "lag": {"0": {"last_enqueued": 20, "behind": 6}, ...},
     ["bodies": [{"partition", "sequence_number", "body"[, "schema_id"]}, ...]]}

``lag`` comes from the stream itself (the receiver runtime metric the hub sends with each delivery,
no management call): per partition, its last enqueued sequence number when the batch's last event of
it was delivered, and how many events were enqueued after that one; empty where the hub sends none.

``sequence_numbers`` is present when the filter dropped events inside the range; ``bodies`` only with
``include_bodies`` and when the bodies' total size is at most ``max_body_bytes``. :func:`read_events`
reads exactly those events back, :func:`ranges_of` merges the ranges of several asset events.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_provider_eh.client import sdk_internals
from airflow_provider_eh.client.failures import FailureSite
from airflow_provider_eh.client.partition_readers import LastEnqueued
from airflow_provider_eh.client.typed_events import AsyncTypedDecoder, json_safe, typed_content
from airflow_provider_eh.errors import UndecodableEventError
from airflow_provider_eh.hooks.event_hubs import EventHubAsyncHook
from airflow_provider_eh.hooks.schema_registry import SchemaRegistryAsyncHook
from airflow_provider_eh.triggers.partition_stream import PartitionStream


def _raw_body(event: Any) -> bytes | str:
    return b"".join(event.body) if not isinstance(event.body, (bytes, str)) else event.body


def event_record(event: Any, partition_id: str) -> dict[str, Any]:
    """A JSON-able view of an SDK ``EventData``: what filters receive and what ``bodies`` hold (a typed event's
    body as received: :func:`decoded_record` decodes it)."""
    raw = _raw_body(event)
    body = raw
    if isinstance(raw, bytes):
        try:
            body = raw.decode("utf-8")
        except UnicodeDecodeError:
            body = raw.hex()
    props = {
        (k.decode() if isinstance(k, bytes) else str(k)): (v.decode() if isinstance(v, bytes) else v)
        for k, v in (event.properties or {}).items()
    }
    enqueued = getattr(event, "enqueued_time", None)
    last = LastEnqueued.of(sdk_internals.message_of(event))
    record = {
        "partition": partition_id,
        "sequence_number": int(event.sequence_number),
        "offset": None if event.offset is None else str(event.offset),
        "enqueued_time": enqueued.isoformat() if enqueued else None,
        "properties": props,
        "body": body,
        "last_enqueued": None if last is None else last.sequence_number,  # the partition's, at delivery
    }
    content_type = getattr(event, "content_type", None)
    typed = typed_content(content_type)
    if typed is not None:
        record.update(content_type=content_type, schema_id=typed.schema_id)
    return record


async def decoded_record(event: Any, partition_id: str, decoder: AsyncTypedDecoder | None) -> dict[str, Any]:
    """
    :func:`event_record`, a typed event's ``body`` the decoded value (JSON-safe), or its ``decode_error`` saying
    why it could not be (unknown schema id, corrupt content, no registry configured); ``decoder`` ``None``:
    bodies as received.

    A registry that refuses or does not answer raises: the batch is not handed over, and is read again.
    """
    record = event_record(event, partition_id)
    if decoder is None or "schema_id" not in record:
        return record
    raw = _raw_body(event)
    try:
        value = await decoder.decode(raw if isinstance(raw, bytes) else raw.encode("utf-8"), record["content_type"])
    except UndecodableEventError as exc:
        record["decode_error"] = f"event {record['sequence_number']} of partition {partition_id}: {exc}"
    else:
        record["body"] = json_safe(value)
    return record


def last_reported(records: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each partition's last record carrying the hub's figure (``last_enqueued``), by partition."""
    return {r["partition"]: r for r in records if r.get("last_enqueued") is not None}


def behind(record: Mapping[str, Any]) -> int:
    """Events enqueued after ``record`` when it was delivered (a record of :func:`last_reported`)."""
    return LastEnqueued(int(record["last_enqueued"])).lag(int(record["sequence_number"]))


def batch_payload(
    records: Sequence[dict[str, Any]], *, namespace: str, eventhub: str, consumer_group: str,
    include_bodies: bool = False, max_body_bytes: int = 65536,
) -> dict[str, Any]:
    """The payload of one batch: the kept ``records`` per partition as ranges (with gaps listed)."""
    partitions: dict[str, dict[str, Any]] = {}
    for r in records:
        p = partitions.setdefault(r["partition"], {"first": r["sequence_number"], "last": r["sequence_number"], "seqs": []})
        p["last"] = r["sequence_number"]
        p["seqs"].append(r["sequence_number"])
    for p in partitions.values():
        seqs = p.pop("seqs")
        p["count"] = len(seqs)
        if len(seqs) != p["last"] - p["first"] + 1:
            p["sequence_numbers"] = seqs
    lag = {p: {"last_enqueued": r["last_enqueued"], "behind": behind(r)} for p, r in last_reported(records).items()}
    payload: dict[str, Any] = {
        "namespace": namespace, "eventhub": eventhub, "consumer_group": consumer_group,
        "events": len(records), "partitions": dict(sorted(partitions.items())), "lag": dict(sorted(lag.items())),
    }
    if include_bodies:
        size = sum(len(str(r["body"]).encode()) for r in records)
        if size <= max_body_bytes:
            payload["bodies"] = [
                {"partition": r["partition"], "sequence_number": r["sequence_number"], "body": r["body"],
                 **({"schema_id": r["schema_id"]} if "schema_id" in r else {})} for r in records
            ]
        else:
            payload["bodies_omitted"] = f"{size} bytes of bodies exceed max_body_bytes={max_body_bytes}; use read_events"
    return payload


def ranges_of(payloads: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    r"""
    Merge the ranges of several event payloads (or asset event ``extra``\ s): per partition the lowest
    ``first`` and the highest ``last``. A run triggered by several asset events gets them all.
    """
    merged: dict[str, dict[str, int]] = {}
    for item in payloads:
        payload = item.get("payload", item)
        for pid, r in payload.get("partitions", {}).items():
            m = merged.setdefault(str(pid), {"first": int(r["first"]), "last": int(r["last"])})
            m["first"] = min(m["first"], int(r["first"]))
            m["last"] = max(m["last"], int(r["last"]))
    return merged


def read_events(
    payload: Mapping[str, Any], event_hubs_conn_id: str = EventHubAsyncHook.default_conn_name, *, timeout: float = 60.0,
    schema_registry_conn_id: str | None = None,
) -> list[dict[str, Any]]:
    """
    Read back exactly the events of one payload (or asset event ``extra``): every partition's range, and
    only the listed sequence numbers when the filter dropped some. Records as :func:`event_record` gives,
    typed ones decoded with the Schema Registry of ``schema_registry_conn_id`` (default: ``event_hubs_conn_id``'s).
    """
    payload = payload.get("payload", payload)
    wanted = {
        str(pid): (int(r["first"]), int(r["last"]), set(r["sequence_numbers"]) if "sequence_numbers" in r else None)
        for pid, r in payload.get("partitions", {}).items()
    }

    async def read() -> list[dict[str, Any]]:
        hook = EventHubAsyncHook(event_hubs_conn_id, payload["eventhub"])
        endpoint = await hook.get_endpoint()
        registry = SchemaRegistryAsyncHook(schema_registry_conn_id or event_hubs_conn_id)
        decoder = AsyncTypedDecoder(registry.get_endpoint, conn_id=registry.event_hubs_conn_id)
        try:
            return await read_with(endpoint, decoder)
        finally:
            await decoder.close()

    async def read_with(endpoint: Any, decoder: AsyncTypedDecoder) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for pid, (first, last, only) in sorted(wanted.items()):
            site = FailureSite.of_endpoint(event_hubs_conn_id, endpoint, consumer_group=payload["consumer_group"],
                                           done="Nothing was written: reading a payload's events back changes nothing.")
            reader = PartitionStream(endpoint, payload["consumer_group"], {pid: first - 1}, max_batch_size=300, site=site)
            got: list[dict[str, Any]] = []
            async with reader:
                deadline = time.monotonic() + timeout
                while not got or got[-1]["sequence_number"] < last:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(
                            f"hub {payload['eventhub']!r} partition {pid}: read up to seq "
                            f"{got[-1]['sequence_number'] if got else first - 1} of {first}..{last} in {timeout:.0f} s"
                        )
                    item = await reader.get(left)
                    if item is not None:
                        got.extend([await decoded_record(e, pid, decoder) for e in item[1]
                                    if first <= e.sequence_number <= last])
            out.extend(r for r in got if only is None or r["sequence_number"] in only)
        return out

    return asyncio.run(read())
