"""What the typed-events tests share: a local endpoint with its Schema Registry, the connection to it, an
Avro record of orders, reading a hub back, and decoding events with Microsoft's ``AvroEncoder`` elsewhere.

The endpoint serves its registry over HTTPS with a private CA and ``--require-auth``, as Azure's
needs a token; Microsoft's unmodified clients reach it through the connection's
``schema_registry_namespace`` and ``ca_bundle`` fields.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.readback import events_after, partition_span
from tests.support.tls import Certificates, make_certificates

KEY_NAME, KEY = "RootManageSharedAccessKey", "typed-publish-key"


def order_schema(*extra: dict[str, Any], name: str = "Order") -> dict[str, Any]:
    """An Avro record of orders (``name`` in ``com.example``), with ``extra`` fields after the three."""
    return {"type": "record", "name": name, "namespace": "com.example",
            "fields": [{"name": "order_id", "type": "long"}, {"name": "amount", "type": "int"},
                       {"name": "customer", "type": "string"}, *extra]}


@contextmanager
def registry_endpoint(directory: Path, groups: dict[str, tuple[str, str]]) -> Iterator[tuple[Any, Certificates]]:
    """``(endpoint, certificates)``: the local endpoint with its registry over HTTPS, token auth, and ``groups``
    (name -> (format, compatibility mode))."""
    from eventhubs_local import EmulatorProcess

    certificates = make_certificates(directory / "tls")
    with EmulatorProcess(directory / "eh", key_name=KEY_NAME, key=KEY, require_auth=True, registry_port=0,
                         tls=(certificates.cert, certificates.key), schema_groups=groups,
                         websocket_port=None) as process:
        yield process, certificates


def connection_extra(endpoint: Any, certificates: Certificates, hub: str) -> dict[str, str]:
    """The ``azure_event_hubs`` connection's extra for ``hub``, with the registry's address and CA."""
    return {"connection_string": endpoint.connection_string(hub), "schema_registry_namespace": endpoint.registry_namespace,
            "ca_bundle": str(certificates.ca)}


def read_back(endpoint: Any, hub: str, partitions: tuple[str, ...] = ("0", "1")) -> list[Any]:
    """Every event of the hub as the SDK receives it (``EventData``: body and content type)."""
    eh = EventHubsEndpoint.from_connection_string(endpoint.connection_string(hub), hub)
    out: list[Any] = []
    for pid in partitions:
        span = partition_span(eh, pid)
        if not span.is_empty:
            out += events_after(eh, pid, -1, span.last_enqueued_sequence_number)
    return out


def decode_elsewhere(events: list[Any], registry: Any, tmp_path: Path) -> list[Any]:
    """Each event decoded by Microsoft's unmodified ``AvroEncoder`` in another process; ``registry``: the
    :class:`~airflow_provider_eh.client.schema_registry.SchemaRegistryEndpoint` (pickled to it)."""
    (tmp_path / "endpoint.pickle").write_bytes(pickle.dumps(registry))
    (tmp_path / "events.json").write_text(json.dumps([{"content": b"".join(e.body).hex(), "content_type": e.content_type}
                                                      for e in events]))
    decoder = (
        "import json, pickle, sys\n"
        "from azure.schemaregistry.encoder.avroencoder import AvroEncoder\n"
        "with pickle.loads(open(sys.argv[1], 'rb').read()).client() as client:\n"
        "    encoder = AvroEncoder(client=client)\n"
        "    events = json.load(open(sys.argv[2]))\n"
        "    print(json.dumps([encoder.decode({'content': bytes.fromhex(e['content']),\n"
        "                                      'content_type': e['content_type']}) for e in events]))\n"
    )
    done = subprocess.run([sys.executable, "-c", decoder, str(tmp_path / "endpoint.pickle"), str(tmp_path / "events.json")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
