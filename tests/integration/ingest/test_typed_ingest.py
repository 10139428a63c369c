"""Consuming typed events: events encoded by Microsoft's encoders, ingested into columns and matched by triggers.

One endpoint for the module (HTTPS Schema Registry with a private CA, ``--require-auth``). Events are encoded
in another process by Microsoft's unmodified ``AvroEncoder`` and ``JsonSchemaEncoder`` and sent with the plain
SDK (``typed_producer.py``); the provider decodes them by the schema id in their content type. Counted by
reading the sinks back: SQLite and Delta get the same rows; an event that does not decode is dead-lettered with
its reason, the rest loaded; without a registry the typed events wait as dead letters naming the setting, and a
replay with one loads them. The event trigger's filter and the await sensor's match see the decoded record.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient

from airflow_provider_eh.hooks.schema_registry import SchemaRegistryHook
from eventhubs_local import EmulatorProcess
from tests.conftest import connection_env, unique_name
from tests.support.events import fire_trigger
from tests.support.tls import Certificates, make_certificates
from tests.support.typed_columns import EVERYTHING, avro_row, tagged

KEY_NAME, KEY = "RootManageSharedAccessKey", "typed-ingest-key"
CONN_ID, NO_REGISTRY_ID, BAD_KEY_ID, WASB_ID = "eh_typed_in", "eh_typed_no_registry", "eh_typed_bad_key", "wasb_typed_in"
AVRO_GROUP, JSON_GROUP = "orders", "orders_json"
PRODUCER = Path(__file__).with_name("typed_producer.py")
COLUMNS = ["order_id", "amount", "customer"]
FILTERS = "tests.integration.events.event_filters"

ORDER = {"type": "record", "name": "Order", "namespace": "com.example",
         "fields": [{"name": "order_id", "type": "long"}, {"name": "amount", "type": "int"},
                    {"name": "customer", "type": "string"}]}
REFUND = {"type": "record", "name": "Refund", "namespace": "com.example",
          "fields": [{"name": "order_id", "type": "long"}, {"name": "cents", "type": "int"}]}
ORDER_JSON = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "OrderJson", "type": "object",
              "properties": {"order_id": {"type": "integer"}, "amount": {"type": "integer"},
                             "customer": {"type": "string"}},
              "required": ["order_id", "amount", "customer"]}


EVERY_TYPE = {**EVERYTHING, "fields": [f for f in EVERYTHING["fields"] if f["name"] != "amount"]}  # filters read amount


def order(order_id: int, amount: int, customer: str = "c") -> dict[str, Any]:
    return {"order_id": order_id, "amount": amount, "customer": customer}


def avro(partition: str, row: dict[str, Any], *, kind: str = "avro", schema: dict[str, Any] = ORDER) -> dict[str, Any]:
    return {"partition": partition, "kind": kind, "row": row, "schema": schema, "group": AVRO_GROUP}


def json_schema(partition: str, row: dict[str, Any]) -> dict[str, Any]:
    return {"partition": partition, "kind": "json", "row": row, "schema": ORDER_JSON, "group": JSON_GROUP}


def other(partition: str, kind: str, row: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"partition": partition, "kind": kind, "row": row or {}}


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("typed-ingest-tls"))


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory, certificates: Certificates) -> Iterator[EmulatorProcess]:
    """The endpoint with its Schema Registry over HTTPS and token auth: an Avro group and a JSON Schema group."""
    with EmulatorProcess(tmp_path_factory.mktemp("typed-ingest"), key_name=KEY_NAME, key=KEY, require_auth=True,
                         registry_port=0, tls=(certificates.cert, certificates.key),
                         schema_groups={AVRO_GROUP: ("Avro", "None"), JSON_GROUP: ("Json", "None")},
                         websocket_port=None) as process:
        yield process


@pytest.fixture
def hub(endpoint: EmulatorProcess, certificates: Certificates, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new hub of 2 partitions; ``CONN_ID`` reaches it and the registry, ``NO_REGISTRY_ID`` only the hub,
    ``BAD_KEY_ID`` the registry with a key it refuses."""
    name = unique_name("typedin")
    endpoint.admin.create_hub(name, partitions=2)
    conn_str = endpoint.connection_string(name)
    monkeypatch.setenv(*connection_env(CONN_ID, "azure_event_hubs", extra={
        "connection_string": conn_str, "schema_registry_namespace": endpoint.registry_namespace,
        "ca_bundle": str(certificates.ca)}))
    monkeypatch.setenv(*connection_env(NO_REGISTRY_ID, "azure_event_hubs", extra={"connection_string": conn_str}))
    monkeypatch.setenv(*connection_env(BAD_KEY_ID, "azure_event_hubs", extra={
        "connection_string": conn_str.replace(KEY, "not-the-key"), "schema_registry_namespace": endpoint.registry_namespace,
        "ca_bundle": str(certificates.ca)}))
    return name


def send_elsewhere(endpoint: EmulatorProcess, hub: str, events: list[dict[str, Any]], tmp_path: Path) -> list[str | None]:
    """Encode and send ``events`` in another process with Microsoft's encoders and the plain SDK; their schema ids."""
    (tmp_path / "registry.pickle").write_bytes(pickle.dumps(SchemaRegistryHook(CONN_ID).get_endpoint()))
    (tmp_path / "events.json").write_text(json.dumps(events))
    done = subprocess.run([sys.executable, str(PRODUCER), str(tmp_path / "registry.pickle"),
                           endpoint.connection_string(hub), str(tmp_path / "events.json")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])["ids"]


def context(run_id: str) -> dict[str, Any]:
    return {"ti": SimpleNamespace(try_number=1, map_index=-1), "run_id": run_id}


def ingest(table: str, columns: list[str] = COLUMNS, **options: Any) -> dict[str, Any]:
    """``EventHubIngestOperator.execute`` of the hub to its end, the default row function mapping ``columns``."""
    from airflow_provider_eh.operators.ingest import EventHubIngestOperator

    operator = EventHubIngestOperator(task_id="ingest", table=table, columns=columns, max_wait_time=0.3,
                                      max_duration=60, batch_seconds=0.3,
                                      **{"event_hubs_conn_id": CONN_ID, **options})
    return operator.execute(context("r1"))  # type: ignore[arg-type]


def sqlite_db(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / f"{name}.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE orders (order_id BIGINT NOT NULL, amount INTEGER NOT NULL, customer TEXT NOT NULL)")
    monkeypatch.setenv(*connection_env(name, "sqlite", host=str(db)))
    return db


def sql(db: Path, statement: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(statement).fetchall()


def test_typed_events_load_into_columns_on_sqlite_and_delta_and_what_does_not_decode_is_dead_lettered(
        endpoint: EmulatorProcess, hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException
    from deltalake import DeltaTable

    from airflow_provider_eh.errors import CredentialRefusedError

    from airflow_provider_eh.client.endpoint import EventHubsEndpoint
    from airflow_provider_eh.ingest.__main__ import main
    from airflow_provider_eh.operators.ingest import EventHubDeadLetterReplayOperator

    events = [
        avro("0", order(1, 10, "ü-1")), avro("0", order(2, 20)), avro("0", order(3, 30), kind="corrupt"),
        other("0", "plain", order(4, 40)), avro("0", order(5, 50)),
        avro("1", order(6, 60)), json_schema("1", order(7, 70)), other("1", "unknown"),
        json_schema("1", order(8, 80)), avro("1", {"order_id": 9, "cents": 90}, schema=REFUND), avro("1", order(10, 100)),
    ]
    ids = send_elsewhere(endpoint, hub, events, tmp_path)
    avro_id, json_id, refund_id, unknown_id = ids[0], ids[6], ids[9], ids[7]
    assert len({avro_id, json_id, refund_id, unknown_id}) == 4 and ids[3] is None
    loaded = sorted([(1, 10, "ü-1"), (2, 20, "c"), (4, 40, "c"), (5, 50, "c"), (6, 60, "c"), (7, 70, "c"),
                     (8, 80, "c"), (10, 100, "c")])
    refused = [("0", 2, "undecodable", avro_id), ("1", 2, "undecodable", unknown_id), ("1", 4, "rejected", refund_id)]

    def check_letters(letters: list[tuple[str, int, str, str]]) -> None:
        assert [(p, s, r) for p, s, r, _ in sorted(letters)] == [(p, s, r) for p, s, r, _ in refused]
        for (p, s, _, error), (_, _, _, schema_id) in zip(sorted(letters), refused, strict=True):
            assert f"schema id {schema_id}" in error, error
        errors = {(p, s): e for p, s, _, e in letters}
        assert errors[("0", 2)].startswith("event 2 of partition 0: schema id") and "does not decode as Avro" in errors[("0", 2)]
        assert errors[("1", 2)].startswith("event 2 of partition 1: ") and "is not in the Schema Registry" in errors[("1", 2)]
        assert "has no field 'amount' for column 'amount'" in errors[("1", 4)], errors[("1", 4)]

    # SQLite: the decoded records' fields are the columns; what does not decode is a dead letter with its reason
    db = sqlite_db(tmp_path, "typed_sqlite", monkeypatch)
    summary = ingest("orders", sql_conn_id="typed_sqlite")
    assert summary["events"] == 11
    assert sorted(sql(db, "SELECT order_id, amount, customer FROM orders")) == loaded
    check_letters(sql(db, "SELECT partition_id, sequence_number, reason, error FROM eh_ingest_dead_letter"))

    # Delta: decoding happens before the sink, so the same rows and dead letters
    lake = str(tmp_path / "lake" / "orders")
    ingest(lake, sink="delta")
    rows = DeltaTable(lake).to_pyarrow_table().to_pylist()
    assert sorted((r["order_id"], r["amount"], r["customer"]) for r in rows) == loaded
    letters = DeltaTable(lake + "_dead_letters").to_pyarrow_table().to_pylist()
    check_letters([(d["partition_id"], d["sequence_number"], d["reason"], d["error"]) for d in letters])

    # no registry configured: only the untyped event loads; the typed ones wait as dead letters naming the setting,
    # their content type kept with them, and a replay with the registry loads the ones that decode (partition 0
    # from a shell, then the rest by the operator)
    bare = sqlite_db(tmp_path, "typed_bare", monkeypatch)
    # first a registry that refuses the credential: the run's failure, not the events'; nothing is committed
    with pytest.raises(AirflowFailException, match=rf"Connection '{BAD_KEY_ID}': the Schema Registry at .* refused the "
                                                   "credential") as refused:
        ingest("orders", sql_conn_id="typed_bare", schema_registry_conn_id=BAD_KEY_ID)
    assert isinstance(refused.value.__cause__, CredentialRefusedError), repr(refused.value.__cause__)
    assert sql(bare, "SELECT COUNT(*) FROM orders") == [(0,)]
    assert sql(bare, "SELECT COUNT(*) FROM eh_ingest_checkpoint WHERE sequence_number >= 0") == [(0,)]
    ingest("orders", sql_conn_id="typed_bare", event_hubs_conn_id=NO_REGISTRY_ID)
    assert sql(bare, "SELECT order_id FROM orders") == [(4,)]
    waiting = sql(bare, "SELECT reason, error FROM eh_ingest_dead_letter")
    assert len(waiting) == 10 and {r for r, _ in waiting} == {"undecodable"}
    assert all("set schema_registry_conn_id" in e and "schema_registry_namespace" in e for _, e in waiting), waiting[0]
    capsys.readouterr()
    namespace = EventHubsEndpoint.from_connection_string(endpoint.connection_string(hub)).namespace
    assert main(["--sqlite", str(bare), "--namespace", namespace, "--eventhub", hub, "--table", "orders",
                 "--columns", ",".join(COLUMNS), "--schema-registry-conn-id", CONN_ID, "replay", "--partition", "0"]) == 0
    out = capsys.readouterr().out  # the command's JSON, after what the run logged
    shell = json.loads(out[out.rindex('{\n  "replayed"'):])
    assert sorted(shell["replayed"]) == [["0", 0], ["0", 1], ["0", 4]] and [f[:2] for f in shell["failed"]] == [["0", 2]]
    replayed = EventHubDeadLetterReplayOperator(
        task_id="replay", table="orders", sql_conn_id="typed_bare", columns=COLUMNS, event_hubs_conn_id=NO_REGISTRY_ID,
        schema_registry_conn_id=CONN_ID, fail_on_error=False).execute(context("r2"))  # type: ignore[arg-type]
    assert len(replayed["replayed"]) == 4 and len(replayed["failed"]) == 3
    assert sorted(sql(bare, "SELECT order_id, amount, customer FROM orders")) == loaded


READING = {"type": "record", "name": "Reading", "namespace": "com.example", "fields": [
    {"name": "reading_id", "type": "long"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "taken_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
]}


def test_top_level_decimals_and_instants_load_into_sqlite_in_the_forms_nested_ones_take(
        endpoint: EmulatorProcess, hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A top-level Avro decimal once failed every batch on SQLite (``sqlite3`` binds no ``Decimal``), so the
    consumer group never moved again; a top-level instant went through ``sqlite3``'s deprecated adapter. Now each
    is text, as a nested field's JSON writes it (``json_default``)."""
    readings = [{"reading_id": n, "price": {"$decimal": f"{n}.{n:02d}"},
                 "taken_at": {"$datetime": f"2026-03-01T00:00:{n:02d}.217+00:00"}, "day": {"$date": f"2026-03-{n:02d}"},
                 "ref": f"12345678-1234-5678-1234-5678123456{n:02d}"} for n in range(1, 7)]
    send_elsewhere(endpoint, hub, [{"partition": str(n % 2), "kind": "avro", "row": row, "schema": READING, "group": AVRO_GROUP}
                                   for n, row in enumerate(readings)], tmp_path)
    db = tmp_path / "readings.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE readings (reading_id INTEGER, price TEXT, taken_at TEXT, day TEXT, ref TEXT)")
    monkeypatch.setenv(*connection_env("typed_readings", "sqlite", host=str(db)))
    summary = ingest("readings", sql_conn_id="typed_readings",
                     columns=["reading_id", "price", "taken_at", "day", "ref"])
    assert summary["events"] == 6
    assert sql(db, "SELECT COUNT(*) FROM eh_ingest_dead_letter") == [(0,)]
    rows = sql(db, "SELECT reading_id, price, taken_at, day, ref FROM readings ORDER BY reading_id")
    assert rows == [(n, f"{n}.{n:02d}", f"2026-03-01T00:00:{n:02d}.217000+00:00", f"2026-03-{n:02d}",
                     f"12345678-1234-5678-1234-5678123456{n:02d}") for n in range(1, 7)]


def test_the_trigger_filter_and_the_sensor_match_on_decoded_fields(
        endpoint: EmulatorProcess, hub: str, tmp_path: Path, azurite: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_eh.sensors.await_event import EventHubAwaitEventSensor
    from airflow_provider_eh.triggers.event import EventHubEventTrigger
    from airflow_provider_eh.triggers.payload import read_events

    container = unique_name("c")
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(container)
    monkeypatch.setenv(*connection_env(WASB_ID, "wasb", extra={"connection_string": azurite.connection_string}))
    ids = send_elsewhere(endpoint, hub, [
        avro("0", order(1, 5)), avro("0", order(2, 500, "big")), json_schema("0", order(3, 700, "json")),
        avro("0", order(4, 900), kind="corrupt"), other("0", "plain", order(5, 999)),
        {"partition": "1", "kind": "avro", "row": tagged({k: v for k, v in avro_row(2).items() if k != "amount"}),
         "schema": EVERY_TYPE, "group": AVRO_GROUP},
    ], tmp_path)

    # the event trigger: the filter keeps the big typed orders by their decoded amount; the payload carries
    # their decoded bodies and schema ids
    trigger = EventHubEventTrigger(
        eventhub_name=hub, consumer_group="$Default", checkpoint_container=container, event_hubs_conn_id=CONN_ID,
        wasb_conn_id=WASB_ID, filter=f"{FILTERS}.big_typed_order", batch_window=1.0, include_bodies=True)
    (payload,) = fire_trigger(trigger, 1)
    assert payload["partitions"] == {"0": {"first": 1, "last": 2, "count": 2}}
    assert payload["bodies"] == [
        {"partition": "0", "sequence_number": 1, "body": order(2, 500, "big"), "schema_id": ids[1]},
        {"partition": "0", "sequence_number": 2, "body": order(3, 700, "json"), "schema_id": ids[2]},
    ]
    json.dumps(payload)  # what reaches the asset event is JSON
    assert [(r["body"], r["schema_id"]) for r in read_events(payload, CONN_ID)] == [
        (order(2, 500, "big"), ids[1]), (order(3, 700, "json"), ids[2])]  # read back, decoded alike
    # every Avro type in its JSON-safe form
    (everything,) = read_events({"eventhub": hub, "consumer_group": "$Default", "partitions": {"1": {"first": 0, "last": 0}}},
                                CONN_ID)
    assert {k: everything["body"][k] for k in ("price", "ref", "day", "ts_ms", "local_ms", "raw", "span", "address")} == {
        "price": "2.02", "ref": "12345678-1234-5678-1234-567812345602", "day": "2026-03-02",
        "ts_ms": "2026-03-01T00:00:02.217000+00:00", "local_ms": "2026-03-01T09:00:02.005000", "raw": "AgD/",
        "span": {"months": 2, "days": 2, "milliseconds": 3003},
        "address": {"street": "Main 2", "since": "2020-01-02", "deposit": "99.50"}}

    # the await sensor (its trigger, then execute_complete as the task resumes): the first big typed order,
    # and a corrupt one found by its decode error
    def sensed(filter_name: str) -> Any:
        sensor = EventHubAwaitEventSensor(task_id="wait", eventhub_name=hub, filter=f"{FILTERS}.{filter_name}",
                                          start_at="earliest", event_hubs_conn_id=CONN_ID)

        async def first() -> Any:
            run = sensor._trigger(time.time() + 60).run()
            try:
                return (await anext(run)).payload
            finally:
                await run.aclose()

        return sensor.execute_complete({}, asyncio.run(first()))  # type: ignore[arg-type]

    assert sensed("big_typed_order") == {"order_id": 2, "amount": 500, "schema_id": ids[1], "seq": 1}
    error = sensed("undecodable_event")
    assert error.startswith("event 3 of partition 0: schema id") and "does not decode as Avro" in error, error
