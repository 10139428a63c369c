"""The ingest operator with ``sink="delta"``: a table in Azurite reached with a ``wasb`` connection's account and key
(no connection string), the default JSON row function, dead letters in their own table, a re-run that loads
only what is new, compaction and vacuum by the maintenance operator, and what it refuses before reading an event;
and two writers of one partition racing on a table in Azurite, where delta-rs refuses the later commit."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from azure.storage.blob import BlobServiceClient
from conftest import publish, stamped
from deltalake import DeltaTable
from eventhubs_local.azurite import ACCOUNT_KEY, ACCOUNT_NAME

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.hooks.blob import BlobStorageHook
from airflow_provider_eh.ingest import Stream
from airflow_provider_eh.ingest.sinks.delta import DeltaIngestStore, DeltaTarget
from airflow_provider_eh.operators.delta_maintenance import DeltaTableMaintenanceOperator
from airflow_provider_eh.operators.ingest import EventHubIngestOperator
from tests.conftest import connection_env, unique_name


def context(run_id: str) -> dict:
    return {"ti": SimpleNamespace(try_number=1, map_index=-1), "run_id": run_id}


def test_delta_sink_through_the_operator_on_azure_storage(connections, azurite, eh_conn_str, monkeypatch, caplog):
    lake = unique_name("lake")
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(lake)
    monkeypatch.setenv(*connection_env("lake", "wasb", host=f"http://{azurite.host}:{azurite.port}/{ACCOUNT_NAME}",
                                       login=ACCOUNT_NAME, password=ACCOUNT_KEY))
    uri = f"az://{lake}/orders"
    options = BlobStorageHook("lake").delta_storage_options()
    assert options == {"azure_storage_account_name": ACCOUNT_NAME, "azure_storage_account_key": ACCOUNT_KEY,
                       "azure_storage_endpoint": f"http://{azurite.host}:{azurite.port}/{ACCOUNT_NAME}",
                       "allow_http": "true"}
    publish(eh_conn_str, {p: stamped(p, 3) for p in "01"})
    publish(eh_conn_str, {"1": [{"body": "not json"}]})

    def ingest(run_id: str) -> dict:
        operator = EventHubIngestOperator(
            task_id="ingest", table=uri, sink="delta", wasb_conn_id="lake",
            row_function="json", max_wait_time=0.3, max_duration=60, batch_seconds=0.5,
        )
        return operator.execute(context(run_id))  # type: ignore[arg-type]

    caplog.set_level(logging.DEBUG)
    first = ingest("r1")
    assert first["events"] == 7
    assert ACCOUNT_KEY not in caplog.text and ACCOUNT_KEY not in str(first)
    table = DeltaTable(uri, storage_options=options)
    assert sorted(r["id"] for r in table.to_pyarrow_table().to_pylist()) == sorted(f"p{p}-{i}" for p in "01" for i in range(3))
    letters = DeltaTable(uri + "_dead_letters", storage_options=options).to_pyarrow_table().to_pylist()
    assert [(d["partition_id"], d["sequence_number"], d["reason"]) for d in letters] == [("1", 3, "rejected")]

    publish(eh_conn_str, {"0": stamped("0", 2, start=3)})
    second = ingest("r2")
    assert second["events"] == 2
    table = DeltaTable(uri, storage_options=options)
    assert len(table.to_pyarrow_table()) == 8
    endpoint = EventHubsEndpoint.from_connection_string(eh_conn_str)
    store = DeltaIngestStore(DeltaTarget(uri, options), Stream(endpoint.namespace, endpoint.eventhub_name, "$Default"))
    assert {p: c.sequence_number for p, c in store.checkpoints("0123").items()} == {"0": 4, "1": 3, "2": -1, "3": -1}
    assert len(table.history()) == 3  # one commit per partition and run: each gathered to its target
    assert len(table.file_uris()) == 3

    maintained = DeltaTableMaintenanceOperator(task_id="compact", table=uri, wasb_conn_id="lake",
                                               vacuum_retention_hours=0).execute(context("r3"))  # type: ignore[arg-type]
    assert maintained["vacuumed_files"] == 3 and ACCOUNT_KEY not in str(maintained)
    table = DeltaTable(uri, storage_options=options)
    assert len(table.file_uris()) == 1 and len(table.to_pyarrow_table()) == 8
    assert store.checkpoints("0")["0"].sequence_number == 4  # compaction keeps the checkpoints


@pytest.mark.parametrize(("options", "named"), [
    ({"session_key": "property:order"}, "session_key"),
    ({"delta_mode": "merge"}, "merge_keys"),
    ({"sink": "parquet"}, "sink 'parquet'"),
])
def test_delta_sink_refuses_what_it_cannot_keep_before_reading(connections, tmp_path, options, named):
    with pytest.raises(Exception, match=named) as raised:  # an unknown sink already when the DAG is parsed
        operator = EventHubIngestOperator(task_id="ingest", table=str(tmp_path / "t"), **{"sink": "delta", **options})
        operator.execute(context("r1"))  # type: ignore[arg-type]
    assert isinstance(raised.value, SinkConfigError) or isinstance(raised.value.__cause__, SinkConfigError)
    assert not (tmp_path / "t").exists()


def test_two_writers_of_a_partition_in_azure_storage_one_commit_wins(azurite, monkeypatch):
    import json
    from datetime import UTC, datetime

    from airflow_provider_eh.errors import PartitionTakenOverError
    from airflow_provider_eh.ingest import BatchProcessor, IngestEvent

    lake = unique_name("lake")
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(lake)
    monkeypatch.setenv(*connection_env("lake_race", "wasb", extra={"connection_string": azurite.connection_string}))
    target = DeltaTarget(f"abfss://{lake}@{ACCOUNT_NAME}.dfs.core.windows.net/orders",
                         BlobStorageHook("lake_race").delta_storage_options())
    stream = Stream("ns.example.net", "orders", "$Default")
    processor = BatchProcessor("delta_table", lambda e: {"id": e.json()["id"], "seq": e.sequence_number})

    def batch(writer: str, first: int, last: int) -> list[IngestEvent]:
        return [IngestEvent("0", s, str(s), datetime(2026, 1, 1, tzinfo=UTC), json.dumps({"id": f"{writer}{s}"}).encode())
                for s in range(first, last + 1)]

    def commit(store: DeltaIngestStore, events: list[IngestEvent], after: int) -> None:
        with store.transaction() as tx:
            processor.process(tx, "0", events)
            tx.advance_checkpoint("0", after, events[-1].sequence_number, events[-1].offset, "w")

    first = DeltaIngestStore(target, stream)
    commit(first, batch("a", 0, 0), -1)
    second = DeltaIngestStore(target, stream)
    with pytest.raises(PartitionTakenOverError, match="another instance committed it up to sequence number 2"):
        with second.transaction() as tx:  # both read checkpoint 0; the first commits while the second writes
            processor.process(tx, "0", batch("b", 1, 2))
            tx.advance_checkpoint("0", 0, 2, "2", "second")
            commit(first, batch("a", 1, 2), 0)
    table = DeltaTable(target.uri, storage_options=target.storage_options)
    assert sorted(r["id"] for r in table.to_pyarrow_table().to_pylist()) == ["a0", "a1", "a2"]
    assert table.version() == 1
