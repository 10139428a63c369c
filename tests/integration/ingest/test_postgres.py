"""The same transactional batch loop with Postgres as the sink, through Airflow's Postgres connection."""

from __future__ import annotations

from collections import Counter

import psycopg2  # apache-airflow-providers-postgres brings it (requirements/dev.lock)
from conftest import publish, stamped
from worker import rows

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.ingest import BatchProcessor, IngestRun, RunLimits, SqlIngestStore, Stream
from airflow_provider_eh.operators.ingest_base import _sql_connection
from tests.conftest import connection_env


def test_postgres_sink_dedupes_dead_letters_and_resumes_from_its_checkpoint(airflow_db, postgres, eh_conn_str, monkeypatch):
    with psycopg2.connect(postgres) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS events; DROP TABLE IF EXISTS eh_ingest_checkpoint, eh_ingest_dedupe, "
                    "eh_ingest_dead_letter, eh_ingest_session, eh_ingest_deferred")
        cur.execute("CREATE TABLE events (id TEXT NOT NULL, partition_id TEXT NOT NULL, sequence_number BIGINT NOT NULL)")
    host_port = postgres.split("@", 1)[1].split("/", 1)[0]
    host, port = host_port.split(":")
    monkeypatch.setenv(*connection_env("pg_sink", "postgres", host=host, port=int(port), login="postgres", schema="postgres"))

    endpoint = EventHubsEndpoint.from_connection_string(eh_conn_str)

    def ingest():
        store = SqlIngestStore(_sql_connection("pg_sink"), Stream(endpoint.namespace, endpoint.eventhub_name, "$Default"))
        try:
            return IngestRun(
                endpoint, "$Default", store, BatchProcessor("events", rows), owner_id="pg",
                limits=RunLimits(batch_size=4, max_wait_time=0.3, max_duration=60),
            ).run()
        finally:
            store.close()

    first = stamped("0", 6)
    first[2]["body"]["poison"] = True
    publish(eh_conn_str, {"0": first})
    assert ingest()["partitions"]["0"]["dead_letters"] == 1
    publish(eh_conn_str, {"0": stamped("0", 2, start=4) + stamped("0", 2, start=6)})  # 4, 5 again; then 6, 7
    summary = ingest()
    assert summary["partitions"]["0"]["start"] == 5 and summary["partitions"]["0"]["duplicates"] == 2

    with psycopg2.connect(postgres) as conn, conn.cursor() as cur:
        cur.execute("SELECT id FROM events")
        counts = Counter(r[0] for r in cur.fetchall())
        cur.execute("SELECT partition_id, sequence_number, reason FROM eh_ingest_dead_letter")
        letters = cur.fetchall()
        cur.execute("SELECT sequence_number FROM eh_ingest_checkpoint WHERE partition_id = '0'")
        (checkpoint,) = cur.fetchone()
    assert set(counts) == {f"p0-{i}" for i in (0, 1, 3, 4, 5, 6, 7)} and max(counts.values()) == 1
    assert letters == [("0", 2, "rejected")]
    assert checkpoint == 9
