"""Every Avro type and JSON Schema format, produced with Microsoft's encoders in another process, lands as its own
column type in every sink (SQLite, Postgres, MariaDB, a Delta table on local disk and in Azurite), read back with the
database's own client (``deltalake`` for Delta) and compared column by column with what the producer encoded; the
table is created from the schema, a field a new version of the schema gains becomes a column on the next run, and a
field whose new type its column cannot hold is named before anything is written.

One Airflow-free engine run per sink and step (``IngestRun``; the operator is not the point here).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import sinks
from test_typed_ingest import AVRO_GROUP, CONN_ID, JSON_GROUP, certificates, endpoint, hub, send_elsewhere  # noqa: F401

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.typed_events import TypedDecoder
from airflow_provider_eh.hooks.schema_registry import SchemaRegistryHook
from airflow_provider_eh.ingest import BatchProcessor, IngestRun, RunLimits, SqlIngestStore, Stream, json_rows
from tests.support.typed_columns import COLUMNS, EVERYTHING, avro_row, expected, read_back, tagged

NEWER = copy.deepcopy(EVERYTHING)
NEWER["fields"].append({"name": "rating", "type": ["null", "double"], "default": None})
READING_JSON = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "ReadingJson", "type": "object",
                "properties": {"id": {"type": "integer"}, "value": {"type": "number"},
                               "at": {"type": "string", "format": "date-time"},
                               "day": {"type": "string", "format": "date"}, "ref": {"type": "string", "format": "uuid"},
                               "place": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "required": ["id", "value", "at", "day", "ref", "place"]}


def produce(process: Any, hub_name: str, tmp_path: Path, ns: list[int], schema: dict[str, Any], extra: dict[str, Any]) -> None:
    send_elsewhere(process, hub_name, [{"partition": str(n % 2), "kind": "avro", "row": tagged({**avro_row(n), **extra}),
                                         "schema": schema, "group": AVRO_GROUP} for n in ns], tmp_path)


def run(process: Any, hub_name: str, store: Any, table: str) -> dict[str, Any]:
    """One engine run of the hub to its end into ``store``'s ``table``, the default row function on every field."""
    eh = EventHubsEndpoint.from_connection_string(process.connection_string(hub_name))
    decoder = TypedDecoder(SchemaRegistryHook(CONN_ID).get_endpoint(), conn_id=CONN_ID)
    try:
        return IngestRun(eh, "$Default", store, BatchProcessor(table, json_rows(), decoder=decoder), owner_id="test",
                         limits=RunLimits(max_wait_time=0.3, max_duration=60, batch_seconds=0.2)).run()
    finally:
        decoder.close()


def sql_store(db: Any, hub_name: str) -> SqlIngestStore:
    return SqlIngestStore(sinks.connect(db), Stream("ns", hub_name, "$Default"))


def dict_rows(db: Any, table: str) -> list[dict[str, Any]]:
    conn = sinks.connect(db)
    try:
        cursor = conn.cursor()
        cursor.execute(f"SELECT * FROM {table} ORDER BY id")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        conn.close()


def check(sink: str, rows: list[dict[str, Any]], ns: list[int]) -> None:
    assert [r["id"] for r in rows] == ns
    for n, row in zip(ns, rows, strict=True):
        want = expected(sink, n)
        got = {c: read_back(sink, row[c], c) for c in COLUMNS}
        assert {c: v for c, v in got.items() if v != want[c]} == {}, f"{sink} row {n}: wanted {want}"


def delta_on(sink: str, tmp_path: Path, request: pytest.FixtureRequest, name: str) -> tuple[str, dict[str, str] | None]:
    """A Delta table's URI and storage options: on local disk, or in a new container of Azurite (``delta-azurite``)
    reached with a ``wasb`` connection's account and key, as the operator reaches it."""
    if sink == "delta":
        return str(tmp_path / name), None
    from azure.storage.blob import BlobServiceClient
    from eventhubs_local.azurite import ACCOUNT_NAME

    from airflow_provider_eh.hooks.blob import BlobStorageHook
    from tests.conftest import connection_env, unique_name

    azurite = request.getfixturevalue("azurite")
    lake = unique_name("typedlake")
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(lake)
    request.getfixturevalue("monkeypatch").setenv(*connection_env("typed_lake", "wasb", extra={
        "connection_string": azurite.connection_string}))
    return f"abfss://{lake}@{ACCOUNT_NAME}.dfs.core.windows.net/{name}", BlobStorageHook("typed_lake").delta_storage_options()


@pytest.mark.parametrize("sink", ["sqlite", "postgres", "mariadb", "delta", "delta-azurite"])
def test_every_avro_type_lands_as_its_own_column_type_and_a_new_field_becomes_a_column(
        sink: str, endpoint: Any, hub: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:  # noqa: F811
    from deltalake import DeltaTable

    from airflow_provider_eh.ingest.sinks.delta import DeltaIngestStore, DeltaTarget

    kind = {"mariadb": "mysql", "delta-azurite": "delta"}.get(sink, sink)
    db: Any = str(tmp_path / "sink.db") if sink == "sqlite" else (
        {"postgres": request.getfixturevalue("postgres")} if sink == "postgres" else
        {"mysql": request.getfixturevalue("mariadb")} if sink == "mariadb" else None)
    table, options = ("everything_" + hub.replace("-", "_"), None) if db is not None else delta_on(
        sink, tmp_path, request, "everything")

    def open_store() -> Any:
        if db is not None:
            return sql_store(db, hub)
        return DeltaIngestStore(DeltaTarget(table, options), Stream("ns", hub, "$Default"))

    def rows() -> list[dict[str, Any]]:
        if db is not None:
            return dict_rows(db, table)
        return sorted(DeltaTable(table, storage_options=options).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])

    produce(endpoint, hub, tmp_path, [1, 2, 3], EVERYTHING, {})
    def letters() -> list[Any]:
        if db is not None:
            return sinks.query(db, "SELECT sequence_number, error FROM eh_ingest_dead_letter")
        store = open_store()
        return store.dead_letters()

    assert run(endpoint, hub, open_store(), table)["events"] == 3  # no table yet: created from the events' schema
    assert letters() == []
    check(kind, rows(), [1, 2, 3])

    produce(endpoint, hub, tmp_path, [4], NEWER, {"rating": 4.5})  # a new version of the schema gains a field
    assert run(endpoint, hub, open_store(), table)["events"] == 1
    assert letters() == []
    found = rows()
    check(kind, found, [1, 2, 3, 4])
    assert [r["rating"] for r in found] == [None, None, None, 4.5]


@pytest.mark.parametrize("sink", ["sqlite", "postgres", "mariadb", "delta"])
def test_json_schema_formats_land_as_instants_dates_uuids_and_nested_values(
        sink: str, endpoint: Any, hub: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:  # noqa: F811
    import datetime

    from deltalake import DeltaTable

    from airflow_provider_eh.ingest.sinks.delta import DeltaIngestStore, DeltaTarget

    db: Any = str(tmp_path / "sink.db") if sink == "sqlite" else (
        {"postgres": request.getfixturevalue("postgres")} if sink == "postgres" else
        {"mysql": request.getfixturevalue("mariadb")} if sink == "mariadb" else None)
    table = "readings_" + hub.replace("-", "_") if db is not None else str(tmp_path / "readings")
    send_elsewhere(endpoint, hub, [{"partition": "0", "kind": "json", "schema": READING_JSON, "group": JSON_GROUP, "row": {
        "id": n, "value": n + 0.5, "at": f"2026-03-01T10:00:0{n}.5Z", "day": f"2026-03-0{n}",
        "ref": f"12345678-1234-5678-1234-56781234567{n}", "place": {"name": f"p{n}"}}} for n in (1, 2)], tmp_path)
    store = sql_store(db, hub) if db is not None else DeltaIngestStore(DeltaTarget(table), Stream("ns", hub, "$Default"))
    assert run(endpoint, hub, store, table)["events"] == 2
    at = [datetime.datetime(2026, 3, 1, 10, 0, n, 500000, tzinfo=datetime.UTC) for n in (1, 2)]
    refs = [f"12345678-1234-5678-1234-56781234567{n}" for n in (1, 2)]
    if db is None:
        delta = DeltaTable(table)
        assert DeltaIngestStore(DeltaTarget(table), Stream("ns", hub, "$Default")).dead_letters() == []
        found = sorted(delta.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
        assert [(r["id"], r["value"], r["at"], r["day"], r["ref"], r["place"]) for r in found] == [
            (n, n + 0.5, at[n - 1], datetime.date(2026, 3, n), refs[n - 1], {"name": f"p{n}"}) for n in (1, 2)]
        types = {f.name: str(f.type) for f in delta.schema().fields}
        assert (types["id"], types["value"], types["at"], types["day"], types["ref"]) == (
            'PrimitiveType("long")', 'PrimitiveType("double")', 'PrimitiveType("timestamp")', 'PrimitiveType("date")',
            'PrimitiveType("string")')
        assert types["place"].startswith("StructType(")
        return
    assert sinks.query(db, "SELECT error FROM eh_ingest_dead_letter") == []
    found = dict_rows(db, table)
    if sink == "sqlite":
        assert [(r["id"], r["value"], r["at"], r["day"], r["ref"], json.loads(r["place"])) for r in found] == [
            (n, n + 0.5, at[n - 1].isoformat(), f"2026-03-0{n}", refs[n - 1], {"name": f"p{n}"}) for n in (1, 2)]
    elif sink == "mariadb":
        assert [(r["id"], r["value"], r["at"], r["day"], r["ref"], json.loads(r["place"])) for r in found] == [
            (n, n + 0.5, at[n - 1].replace(tzinfo=None), datetime.date(2026, 3, n), refs[n - 1], {"name": f"p{n}"})
            for n in (1, 2)]
        types = dict(sinks.query(db, "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE "
                                     f"TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{table}'"))
        assert {c: t for c, t in types.items() if c != "place"} == {
            "id": "bigint(20)", "value": "double", "at": "datetime(6)", "day": "date", "ref": "char(36)"}
    else:
        assert [(r["id"], r["value"], r["at"], r["day"], r["ref"], r["place"]) for r in found] == [
            (n, n + 0.5, at[n - 1], datetime.date(2026, 3, n), refs[n - 1], {"name": f"p{n}"}) for n in (1, 2)]
        types = dict(sinks.query(db, f"SELECT column_name, data_type FROM information_schema.columns WHERE table_name = '{table}'"))
        assert types == {"id": "bigint", "value": "double precision", "at": "timestamp with time zone", "day": "date",
                         "ref": "uuid", "place": "jsonb"}


@pytest.mark.parametrize("sink", ["sqlite", "postgres"])
def test_a_field_whose_new_type_its_column_cannot_hold_is_named_before_anything_of_the_batch_is_written(
        sink: str, endpoint: Any, hub: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:  # noqa: F811
    from airflow_provider_eh.errors import SinkConfigError

    db: Any = str(tmp_path / "sink.db") if sink == "sqlite" else {"postgres": request.getfixturevalue("postgres")}
    table = "changed_" + hub.replace("-", "_")
    produce(endpoint, hub, tmp_path, [1], EVERYTHING, {})
    assert run(endpoint, hub, sql_store(db, hub), table)["events"] == 1
    changed = copy.deepcopy(NEWER)
    changed["fields"][2] = {"name": "small", "type": "string"}  # an int before: its column is an integer one
    produce(endpoint, hub, tmp_path, [3], changed, {"small": "three", "rating": 1.0})
    column, fix = {"sqlite": ("INTEGER", r"copy the table into one whose column small is TEXT"),
                   "postgres": ("integer", rf"ALTER TABLE {table} ALTER COLUMN small TYPE TEXT USING small::TEXT")}[sink]
    with pytest.raises(SinkConfigError, match=rf"Table '{table}': the schema of the events has field 'small' as string and "
                                              rf"its column is {column}, which cannot hold it; .*{fix}.*Nothing of the batch"):
        run(endpoint, hub, sql_store(db, hub), table)
    assert [(r["id"], r["small"]) for r in dict_rows(db, table)] == [(1, -1)]
    assert "rating" not in dict_rows(db, table)[0]  # no column added either
    assert sinks.query(db, "SELECT sequence_number FROM eh_ingest_dead_letter") == []
