"""`make demo`: the example pipeline end to end on the local stack.

Starts Azurite and the local Event Hubs endpoint (left running; `make services-down` stops them),
prepares an Airflow home under `.airflow/`, then:

1. runs `eh_daily_orders` for three consecutive days (Spark writes each day's orders, they are
   published exactly once as Avro of the order event's schema, registered in the endpoint's Schema
   Registry, the analytics consumer group decodes and loads them and the sensor sees its checkpoints);
2. runs the same three days again, as a re-run or a backfill with reprocessing would, and shows that
   the hub holds no more events than before;
3. runs `eh_ingest_orders` (the warehouse load into SQLite, in order per order, with dead letters);
4. reads the whole hub back and prints a report: events per day, their content type, duplicates, a
   loaded row, dead letters;
5. event-driven: starts `airflow standalone` (triggerer included) on a DAGs folder holding only
   `eh_on_new_orders`, publishes new orders to the hub `orders-live`, and shows the runs the
   watcher's asset events started and what each loaded (exactly once) into `live_order_events`.

The DAG runs use `dag.test()` in one child process per step (what `airflow dags test` does, without
starting Spark's JVM and Airflow once per day). Everything the demo writes is under `.local/` and
`.airflow/`; running it again publishes nothing new to `orders` (step 5 publishes a new set of
orders to `orders-live` each time, and loads just those).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support import stack  # noqa: E402

AIRFLOW_HOME = REPO / ".airflow"
DEMO_DIR = stack.LOCAL / "demo"
DB = DEMO_DIR / "example.db"
HUB = "orders"
ROWS = 200
# dag.test(logical_date=D) of the daily data-interval schedule processes the day that ends at D
RUN_DATES = ["2026-11-03", "2026-11-04", "2026-11-05"]

RUN_DAGS = """
import json, sys
from datetime import datetime, timezone

from airflow.dag_processing.dagbag import BundleDagBag

dags, dag_id, dates, conf = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
dag = BundleDagBag(dag_folder=dags, bundle_path=dags).get_dag(dag_id)
for date in dates:
    logical_date = datetime.fromisoformat(date).replace(tzinfo=timezone.utc) if date else None
    state = str(dag.test(logical_date=logical_date, run_conf=conf).state)
    print("RESULT " + json.dumps({"date": date, "state": state}), flush=True)
"""


def airflow_env() -> dict[str, str]:
    """The environment of the demo's Airflow commands: its home, the example DAGs and the local stack."""
    return {
        **os.environ,
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        **stack.example_env(DB, DEMO_DIR / "data"),
    }


def airflow(*args: str) -> None:
    """Run an ``airflow`` command in the demo's environment; stop the demo with its output if it fails."""
    result = subprocess.run(
        [sys.executable, "-m", "airflow", *args], env=airflow_env(), cwd=REPO, text=True, capture_output=True
    )
    if result.returncode != 0:
        print(result.stdout[-4000:], result.stderr[-4000:], sep="\n")
        raise SystemExit(f"`airflow {' '.join(args)}` failed with exit code {result.returncode}")


def run_dag(dag_id: str, dates: list[str | None], conf: dict[str, Any]) -> list[str]:
    """Run ``dag_id`` with ``dag.test()`` per logical date in one child process; the tasks' report lines."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", RUN_DAGS, str(REPO / "dags"), dag_id, json.dumps(dates), json.dumps(conf)],
        env=airflow_env(), cwd=REPO, text=True, capture_output=True,
    )
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or len(results) != len(dates) or any(r["state"] != "success" for r in results):
        print(proc.stdout[-6000:], proc.stderr[-6000:], sep="\n")
        raise SystemExit(f"{dag_id} did not succeed: {results}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("interval ", "hub "))]
    print(f"   ({len(dates)} run(s) of {dag_id} succeeded in {time.monotonic() - started:.0f} s)")
    return lines


def read_back() -> list[Any]:
    """Every event of the demo's hub, read back."""
    from airflow_provider_eh.client.endpoint import EventHubsEndpoint
    from airflow_provider_eh.client.readback import read_hub

    return read_hub(EventHubsEndpoint.from_connection_string(stack.event_hubs_connection_string(), HUB))


def show(lines: list[str]) -> None:
    """Print the lines indented under the current step."""
    for line in lines:
        print(f"   {line}")


LIVE_HUB = "orders-live"
LIVE_ORDERS = 10


def live_sink(prefix: str) -> Counter:
    """How often each ``(order_id, step)`` of the orders ``prefix`` is in ``live_order_events`` (read back)."""
    with sqlite3.connect(DB) as conn:
        try:
            rows = conn.execute("SELECT order_id, step FROM live_order_events WHERE order_id LIKE ?", (f"{prefix}-%",)).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # the first run creates it
                return Counter()
            raise
    return Counter((order_id, int(step)) for order_id, step in rows)


def event_driven() -> None:
    """Step 5: new orders in ``orders-live`` start runs of ``eh_on_new_orders`` through its asset watcher."""
    from airflow_provider_eh.client.endpoint import EventHubsEndpoint
    from eventhubs_local import EmulatorAdmin
    from eventhubs_local.ports import free_port
    from tests.support.events import event_dags_folder, order_events, publish_orders
    from tests.support.standalone import AirflowStandalone, standalone_env

    admin = EmulatorAdmin(f"http://{stack.HOST}:{stack.EVENT_HUBS_ADMIN_PORT}")
    if LIVE_HUB not in {h["name"] for h in admin.list_hubs()}:
        admin.create_hub(LIVE_HUB, partitions=2, consumer_groups=["airflow-watcher"])
    home = AIRFLOW_HOME / "standalone"
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = standalone_env(home, port, {**airflow_env(), "EH_EXAMPLE_EVENTS_HUB": LIVE_HUB})
    env.update({
        "AIRFLOW__CORE__DAGS_FOLDER": str(event_dags_folder(DEMO_DIR / "event-dags")),
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "True",  # asset-triggered runs are created with scheduled ones
    })
    airflow = AirflowStandalone(env, port, DEMO_DIR / "standalone.log")
    started = time.monotonic()

    def wait(condition: Any, what: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                print(airflow.tail())
                raise SystemExit(f"{what}: not within {timeout:.0f} s")
            airflow.check_alive()
            time.sleep(1)

    try:
        airflow.start()
        airflow.wait_for_dag("eh_on_new_orders")
        wait(lambda: {r["partition"] for r in admin.receivers(LIVE_HUB) if r["consumer_group"].lower() == "airflow-watcher"}
             == {"0", "1"}, "the triggerer reading the hub as the watcher")
        # the DAG's safety run (its cron, due at the first parse) finishes first, so the orders below
        # are loaded by the run their asset event starts
        wait(lambda: (runs := airflow.runs("eh_on_new_orders")) and all(r["state"] in ("success", "failed") for r in runs),
             "the safety run due at the DAG's first parse")
        before = len(airflow.runs("eh_on_new_orders"))
        prefix = f"live{int(time.time())}"
        endpoint = EventHubsEndpoint.from_connection_string(stack.event_hubs_connection_string(), LIVE_HUB)
        published = publish_orders(endpoint, prefix, LIVE_ORDERS)
        wanted = {(props["order_id"], props["step"]) for _, props in order_events(prefix, LIVE_ORDERS)}
        print(f"   published {published} events ({LIVE_ORDERS} orders) to '{LIVE_HUB}'; waiting for the runs they start")
        wait(lambda: set(live_sink(prefix)) >= wanted
             and all(r["state"] in ("success", "failed") for r in airflow.runs("eh_on_new_orders")),
             f"eh_on_new_orders loading the {published} events")
        runs = airflow.runs("eh_on_new_orders")
        loaders = 0
        for run in runs[before:]:  # the runs that wrote rows (a safety run at start finds nothing to load)
            xcom = airflow.get(
                f"/dags/eh_on_new_orders/dagRuns/{run['dag_run_id']}/taskInstances/report/xcomEntries/return_value")
            summary = xcom.json().get("value", {}) if xcom.status_code == 200 else {}
            if summary.get("rows_written"):
                loaders += 1
                print(f"   run {run['dag_run_id']} ({run['run_type']}, {run['state']}): ranges {summary.get('ranges')}, "
                      f"{summary.get('rows_written')} rows written")
        sink = live_sink(prefix)
        twice = sorted(key for key, n in sink.items() if n > 1)
        if set(sink) != wanted or twice:
            raise SystemExit(f"live_order_events does not hold each published event once: missing "
                             f"{sorted(wanted - set(sink))[:5]}, unexpected {sorted(set(sink) - wanted)[:5]}, twice {twice[:5]}")
        print(f"   {len(sink)} of {published} events in live_order_events, each exactly once (read back), loaded by "
              f"{loaders} run(s) ({time.monotonic() - started:.0f} s with standalone's start)")
    finally:
        airflow.stop()


def main() -> None:
    """Run the demo: start the stack, run the example DAGs, re-run them and show that nothing doubled."""
    started = time.monotonic()
    print("== starting the local stack (Azurite, local Event Hubs endpoint and its Schema Registry) on 127.0.0.1")
    stack.up()
    print(f"== preparing Airflow in {AIRFLOW_HOME}")
    AIRFLOW_HOME.mkdir(exist_ok=True)
    DEMO_DIR.mkdir(parents=True, exist_ok=True)
    airflow("db", "migrate")
    before = len(read_back())
    print(f"   hub '{HUB}' holds {before} events before the demo")

    conf = {"hub": HUB, "rows": ROWS}
    print(f"== eh_daily_orders for three days ({ROWS} orders a day): generate with Spark, publish, load, wait for checkpoints")
    show(run_dag("eh_daily_orders", RUN_DATES, conf))
    after_first = len(read_back())
    print(f"   hub '{HUB}' now holds {after_first} events ({after_first - before:+d})")

    print("== the same three days again (a re-run, as a backfill with reprocessing would do)")
    show(run_dag("eh_daily_orders", RUN_DATES, conf))
    events = read_back()
    print(f"   hub '{HUB}' still holds {len(events)} events ({len(events) - after_first:+d}): nothing new was published")

    print("== eh_ingest_orders: the warehouse load into SQLite, in order per order, with dead letters")
    show(run_dag("eh_ingest_orders", [None], {"hub": HUB}))

    orders = [e for e in events if "order_id" in e.properties]  # the hub may hold other events too
    keys = Counter((e.properties["order_id"], int(e.properties["step"])) for e in orders)
    per_day = Counter(order_id.split("-")[0] for order_id, _ in keys.elements())
    with sqlite3.connect(DB) as conn:
        rows = conn.execute("SELECT COUNT(*) FROM order_events").fetchone()[0]
        conn.row_factory = sqlite3.Row
        sample = conn.execute("SELECT * FROM order_events ORDER BY order_id, step LIMIT 1").fetchone()
        conn.row_factory = None
        letters = conn.execute(
            "SELECT reason, error FROM eh_ingest_dead_letter WHERE eventhub = ? AND consumer_group = '$Default' "
            "AND status = 'dead' ORDER BY partition_id, sequence_number", (HUB,)
        ).fetchall()
    print("== report")
    print("   interval      events in the hub")
    for day, count in sorted(per_day.items()):
        print(f"   {day[:4]}-{day[4:6]}-{day[6:]}    {count}")
    print(f"   events read back from hub '{HUB}': {len(events)} ({len(keys)} distinct order events"
          f"{f', {len(events) - len(orders)} other events' if len(orders) < len(events) else ''})")
    types = Counter(e.content_type or "none" for e in orders)
    print(f"   content types: {', '.join(f'{t} ({n} events)' for t, n in sorted(types.items()))}")
    print(f"   duplicates: {sum(n - 1 for n in keys.values())}")
    print(f"   rows in order_events: {rows}; dead letters: {len(letters)}")
    if sample is not None:
        print(f"   a row, decoded from Avro into the table's columns: {dict(sample)}")
    for reason, error in letters[:2]:
        print(f"     {reason}: {error}")
    print("== eh_on_new_orders: event-driven runs through airflow standalone (scheduler, triggerer)")
    event_driven()
    print(f"== done in {time.monotonic() - started:.0f} s. The local stack keeps running; `make services-down` stops it.")


if __name__ == "__main__":
    main()
