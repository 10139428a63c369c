"""The example DAGs end to end through ``dag.test()`` on the local stack, one hub followed through all runs.

The daily pipeline runs for two consecutive days, then for the same two days again (a re-run
backfill), publishing its orders as Avro against the order event's schema, which it registers; then
the ingestion DAG loads the hub into SQLite and into a Delta table, and loads it again with a
dead-letter replay. Every count is taken from what is really there: the hub read back (and decoded
by Microsoft's ``AvroEncoder`` in another process), the parquet written, the SQLite rows, the Delta
table read with ``deltalake`` and its files with PyArrow.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from typing import Any

import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable

from tests.support.typed_events import decode_elsewhere, read_back
from tests.system.conftest import ExampleStack, explain, order_event_keys

# dag.test(logical_date=D) of a daily data-interval schedule processes the day before D
RUN_DATES = ["2026-11-03", "2026-11-04"]
DAYS = ["2026-11-02", "2026-11-03"]
ROWS = 12
COLUMNS = ("order_id", "step", "event_type", "final", "customer_id", "amount_cents", "currency", "event_time")


def generated_events(stack: ExampleStack) -> list[dict[str, Any]]:
    """Every order event the Spark task wrote, over all days, from the parquet files."""
    import pyarrow.parquet as pq

    return [row for day in DAYS for row in pq.read_table(stack.data_dir / "orders" / f"ds={day}").to_pylist()]


def hub_events(stack: ExampleStack) -> list[Any]:
    from airflow_provider_eh.client.readback import read_hub

    return read_hub(stack.endpoint())


def by_event(rows: list[Any]) -> list[tuple[Any, ...]]:
    """Rows (dicts, or tuples in :data:`COLUMNS` order) as sorted tuples of :data:`COLUMNS`; booleans as 0/1 as SQLite keeps them."""
    tuples = [tuple(row[c] for c in COLUMNS) if isinstance(row, dict) else tuple(row) for row in rows]
    return sorted(tuple(int(v) if isinstance(v, bool) else v for v in row) for row in tuples)


@pytest.fixture(scope="module")
def backfilled_twice(example_stack: ExampleStack) -> dict[str, Any]:
    """The days run, the hub read back, the same days run again, the hub read back again."""
    conf = {"hub": example_stack.hub, "rows": ROWS}
    first, proc = example_stack.run("eh_daily_orders", RUN_DATES, conf)
    assert [r.get("state") for r in first] == ["success"] * len(RUN_DATES), explain(first, proc)
    first_log = proc.stdout
    after_first = hub_events(example_stack)
    second, proc = example_stack.run("eh_daily_orders", RUN_DATES, conf)
    assert [r.get("state") for r in second] == ["success"] * len(RUN_DATES), explain(second, proc)
    return {"after_first": after_first, "after_second": hub_events(example_stack), "log": proc.stdout,
            "first_log": "\n".join(line for line in first_log.splitlines() if line.startswith("interval "))}


def test_backfill_of_days_run_twice_leaves_exactly_one_copy_of_each_event(
    example_stack: ExampleStack, backfilled_twice: dict[str, Any]
) -> None:
    expected = Counter((e["order_id"], e["step"]) for e in generated_events(example_stack))
    assert len(expected) > len(DAYS) * ROWS * 2 - 1 and max(expected.values()) == 1
    assert order_event_keys(backfilled_twice["after_first"]) == expected
    assert order_event_keys(backfilled_twice["after_second"]) == expected  # the re-run published nothing
    assert {e.properties["eh.group"] for e in backfilled_twice["after_second"]} == {"eh_daily_orders"}


def test_the_orders_are_avro_of_the_registered_schema_and_decode_with_microsofts_encoder(
    example_stack: ExampleStack, backfilled_twice: dict[str, Any], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_eh.hooks.schema_registry import SchemaRegistryHook

    monkeypatch.setenv("AIRFLOW_CONN_AZURE_EVENT_HUBS_DEFAULT", example_stack.env["AIRFLOW_CONN_AZURE_EVENT_HUBS_DEFAULT"])
    with SchemaRegistryHook().get_client() as client:  # registered by the first run, in the group the stack made
        schema = client.get_schema(group_name="orders", name="com.example.orders.OrderEvent", version=1)
    registered = schema.properties
    fields = {f["name"]: f["type"] for f in json.loads(schema.definition)["fields"]}
    assert fields == {"order_id": "string", "step": "int", "event_type": "string", "final": "boolean",
                      "customer_id": "string", "amount_cents": "int", "currency": "string", "event_time": "string"}
    events = read_back(example_stack.event_hubs, example_stack.hub)
    assert {e.content_type for e in events} == {f"avro/binary+{registered.id}"}
    decoded = decode_elsewhere(events, SchemaRegistryHook().get_endpoint(), tmp_path)
    assert by_event(decoded) == by_event(generated_events(example_stack))  # the generated rows, field for field
    for day in DAYS:  # each run names the schema it encoded with, the first run and the re-run alike
        assert (f"events encoded as Avro, schema com.example.orders.OrderEvent version {registered.version} "
                f"(id {registered.id}) of group orders") in backfilled_twice["log"]
    assert backfilled_twice["first_log"].count("events encoded as Avro") == len(DAYS)


def test_each_daily_run_loads_its_events_once_and_reports_its_interval(
    example_stack: ExampleStack, backfilled_twice: dict[str, Any]
) -> None:
    with sqlite3.connect(example_stack.db) as conn:
        rows = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM analytics_order_events").fetchall()
    assert by_event(rows) == by_event(generated_events(example_stack))  # decoded from Avro into every column
    for day in DAYS:  # the second pass's summaries: nothing new loaded, the interval's events in the hub
        assert f"interval {day}T00:00:00+00:00 hub {example_stack.hub}:" in backfilled_twice["log"]
    assert "analytics loaded 0 new events" in backfilled_twice["log"]


def test_ingest_dag_loads_each_order_event_once_and_dead_letters_unknown_currencies(
    example_stack: ExampleStack, backfilled_twice: dict[str, Any]
) -> None:
    conf = {"hub": example_stack.hub}
    # a load, then a second run with the replay: nothing new is loaded, and the dead letters fail again
    # (their cause is not fixed) and stay dead with one more attempt
    results, proc = example_stack.run("eh_ingest_orders", [None], conf, {**conf, "replay_dead_letters": True})
    assert results == [{"date": None, "state": "success"}] * 2, explain(results, proc)

    generated = generated_events(example_stack)
    valid = Counter((e["order_id"], e["step"]) for e in generated if e["currency"] != "XXX")
    rejected = {(e["order_id"], e["step"]) for e in generated if e["currency"] == "XXX"}
    assert rejected, "the generator is expected to emit some orders in currency XXX"
    with sqlite3.connect(example_stack.db) as conn:
        table = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM order_events").fetchall()
        rows = Counter(row[:2] for row in table)
        letters = conn.execute(
            "SELECT reason, status, attempts, error FROM eh_ingest_dead_letter WHERE consumer_group = '$Default'"
        ).fetchall()
        sessions = dict(conn.execute(
            "SELECT session_key, completed FROM eh_ingest_session WHERE consumer_group = '$Default'"
        ).fetchall())
    assert rows == valid
    assert by_event(table) == by_event([e for e in generated if e["currency"] != "XXX"])  # every column, decoded
    assert len(letters) == len(rejected)
    assert {(reason, status, attempts) for reason, status, attempts, _ in letters} == {("rejected", "dead", 2)}
    assert all("currency 'XXX'" in error for *_, error in letters)
    assert set(sessions) == {e["order_id"] for e in generated}  # a rejected event still takes its turn
    assert set(sessions.values()) == {1}  # every order reached its final event

    # the lakehouse copy: the same orders once each in the Delta table, whatever the second run and its replay did
    lake = DeltaTable(str(example_stack.data_dir / "lakehouse" / "order_events"))
    assert Counter(zip(*(lake.to_pyarrow_table().column(c).to_pylist() for c in ("order_id", "step")), strict=True)) == valid
    assert by_event(lake.to_pyarrow_table().to_pylist()) == by_event([e for e in generated if e["currency"] != "XXX"])
    files = ds.dataset(lake.file_uris(), format="parquet").to_table()
    assert Counter(zip(files.column("order_id").to_pylist(), files.column("step").to_pylist(), strict=True)) == valid
    lake_letters = DeltaTable(str(example_stack.data_dir / "lakehouse" / "order_events_dead_letters")).to_pyarrow_table()
    assert lake_letters.num_rows == len(rejected)
    assert {(r["reason"], r["status"], r["attempts"]) for r in lake_letters.to_pylist()} == {("rejected", "dead", 2)}


def test_invalid_params_fail_the_run_with_the_params_message(example_stack: ExampleStack) -> None:
    cases = [
        ({"rows": 0}, "Invalid input for param rows: 0 is less than the minimum of 1"),
        ({"rows": 100_001}, "Invalid input for param rows: 100001 is greater than the maximum of 100000"),
        ({"generation": -1}, "Invalid input for param generation: -1 is less than the minimum of 0"),
        ({"state_backend": "s3"}, "Invalid input for param state_backend: 's3' is not one of ['blob', 'variable']"),
        ({"hub": "no spaces"}, "Invalid input for param hub: 'no spaces' does not match"),
    ]
    results, proc = example_stack.run("eh_daily_orders", [RUN_DATES[0]], *[conf for conf, _ in cases], timeout=360)
    assert len(results) == len(cases), explain(results, proc)
    for (conf, message), result in zip(cases, results):
        assert message in result.get("error", ""), (conf, result)
