"""Make the documentation's pictures of the Event Hubs view from a seeded, realistic day of data.

The pictures in ``docs/`` (``eventhubs-view.png``, ``eventhubs-trends.png``, ``eventhubs-tab.png``) show the view
as a user meets it: several hubs, a day of hourly batches whose volume follows the day, and consumers, one of
which falls behind in the afternoon and catches up. Everything is real but the clock: the local Event Hubs
endpoint and Azurite hold the data, the engine publishes every batch (its commit time set to the hour it stands
for), the lag samples are written in the view's own format, and ``airflow standalone`` serves the view to
headless Chromium (the one the browser tests drive); the hour's batch is published by a real DAG run, whose
task instance page shows the Event Hubs tab. The same seed gives the same day, so the pictures can be made
again::

    python scripts/screenshots.py                # write the three pictures into docs/
    python scripts/screenshots.py --out DIR      # elsewhere
    python scripts/screenshots.py --seed 7       # another day

It needs what ``make test`` needs for the browser tests (Chromium, Azurite from npm); its files go to
``.local/screenshots/``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import socket
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "integration" / "ui")]  # the harness's standalone, cdp.py's Chromium

from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore  # noqa: E402
from azure.storage.blob import BlobServiceClient  # noqa: E402

from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.plugins.samples import SampleStore, bucket_start, encode  # noqa: E402
from airflow_provider_eh.publishing import publisher  # noqa: E402
from airflow_provider_eh.publishing.blob_store import BlobProducerStateStore  # noqa: E402
from eventhubs_local import EmulatorProcess  # noqa: E402
from eventhubs_local.azurite import AzuriteProcess  # noqa: E402
from eventhubs_local.ports import free_port  # noqa: E402
from tests.support.standalone import AirflowStandalone, standalone_env  # noqa: E402

WORK = REPO / ".local" / "screenshots"
STATE, CHECKPOINTS = "eh-producer-state", "eh-checkpoints"
# hub -> (partitions, producer group, events in the busiest hour, consumer groups)
HUBS = {
    "orders": (4, "eh_hourly_orders.publish_orders", 1200, ("analytics", "lakehouse")),
    "payments": (2, "eh_payments.publish_payments", 300, ("billing",)),
    "clicks": (4, "eh_clickstream.publish_clicks", 2400, ("dashboard",)),
}
SAMPLE_MINUTES = 10
DAG_ID = "eh_hourly_orders"
# The DAG whose run publishes the current hour's orders: its producer group is the seeded day's
DAG_FILE = """
import pendulum
from airflow.sdk import dag
from airflow_provider_eh.operators.publish import EventHubPublishOperator, ProducerState


def orders_of_the_hour(context):
    hour = context["data_interval_start"].strftime("%Y%m%d%H")
    return [{"body": {"id": f"orders-{hour}-{n:05d}", "amount": 10 + n % 90}, "partition_key": f"customer-{n % 400}"}
            for n in range(240)]


@dag(schedule="@hourly", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False, tags=["event-hubs"])
def eh_hourly_orders():
    EventHubPublishOperator(task_id="publish_orders", eventhub_name="orders", events=orders_of_the_hour,
                            state=ProducerState("blob", container="eh-producer-state"))


eh_hourly_orders()
"""


def _port(preferred: int) -> int:
    """``preferred`` (the local stack's documented port) where it is free, else a free one."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", preferred))
        except OSError:
            return free_port()
    return preferred


def daylight(hour: float) -> float:
    """How busy the day is at an hour, 0 at night to 1 in the early afternoon."""
    return max(0.0, math.sin(math.pi * (hour - 6) / 16)) if 6 <= hour <= 22 else 0.0


def hourly_volume(peak: int, hour: int, rng: random.Random) -> int:
    """Events in one hour of the day: quiet at night, busiest in the early afternoon, with some noise."""
    return max(5, int(peak * (0.08 + 0.92 * daylight(hour)) * rng.uniform(0.85, 1.15)))


def lag_at(group: str, moment: datetime, rng: random.Random) -> int:
    """A consumer group's lag at a moment: ``lakehouse`` gathers events for its commits, so its lag follows the
    traffic; ``analytics`` falls behind between 13:00 and 15:30 and catches up by 17:00; the others keep up."""
    hour = moment.hour + moment.minute / 60
    if group == "lakehouse":
        return int((20 + 220 * daylight(hour)) * rng.uniform(0.8, 1.2))
    if group == "analytics" and 13 <= hour < 17:
        rise = min(hour - 13, 2.5) / 2.5
        fall = max(0.0, hour - 15.5) / 1.5
        return int(3200 * rise * (1 - fall) * rng.uniform(0.9, 1.1)) + rng.randint(0, 20)
    return rng.randint(0, 25)


@contextmanager
def clock_at(moment: datetime) -> Iterator[None]:
    """The publishing engine's clock set to ``moment``: the ledger records each batch at the hour it stands for."""
    fake = mock.Mock(wraps=datetime)
    fake.now.side_effect = lambda tz=None: moment if tz is not None else moment.replace(tzinfo=None)
    with mock.patch.object(publisher, "datetime", fake):
        yield


def seed_day(event_hubs: EmulatorProcess, blob: str, rng: random.Random, now: datetime) -> None:
    """Publish a day of hourly batches per hub, write the day's lag samples, and leave the consumers' checkpoints."""
    service = BlobServiceClient.from_connection_string(blob)
    states, checkpoints = service.get_container_client(STATE), service.get_container_client(CHECKPOINTS)
    start = bucket_start(now - timedelta(hours=24), 3600)
    for hub, (_, group, peak, consumers) in HUBS.items():
        endpoint = EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)
        engine = publisher.IdempotentPublisher(endpoint, BlobProducerStateStore(states), producer_group=group)
        for h in range(25):
            moment = start + timedelta(hours=h, minutes=rng.randint(1, 6))
            if moment > now:
                break
            events = [{"body": {"id": f"{hub}-{moment:%Y%m%d%H}-{n:05d}", "amount": rng.randint(1, 500)},
                      "partition_key": f"customer-{rng.randint(0, 400)}"} for n in range(hourly_volume(peak, moment.hour, rng))]
            with clock_at(moment):
                engine.publish(events, batch_id=f"{moment:%Y-%m-%dT%H}")  # an hourly DAG's data interval
        print(f"published a day of hourly batches to {hub}", flush=True)
        store = SampleStore(checkpoints, endpoint.namespace, hub)
        moment = bucket_start(start, SAMPLE_MINUTES * 60)
        while moment <= now:
            groups = [{"consumer_group": g, "partitions": [
                {"partition": str(p), "lag_events": (lag := lag_at(g, moment, rng)), "lag_seconds": round(lag / 12, 1)}
                for p in range(HUBS[hub][0])]} for g in consumers]
            store.write(bucket_start(moment, 60), encode(moment, 60.0, groups))
            moment += timedelta(minutes=SAMPLE_MINUTES)
        leave_checkpoints(endpoint, event_hubs.connection_string(hub), blob, consumers, now, rng)


def leave_checkpoints(endpoint: EventHubsEndpoint, conn_str: str, blob: str, consumers: tuple[str, ...],
                      now: datetime, rng: random.Random) -> None:
    """Each consumer group's checkpoints as they stand at the end of the day, as the SDK's processor writes them."""
    from azure.eventhub import EventHubConsumerClient

    store = BlobCheckpointStore.from_connection_string(blob, CHECKPOINTS)
    with EventHubConsumerClient.from_connection_string(conn_str, "$Default", eventhub_name=endpoint.eventhub_name) as client:
        last = {p: client.get_partition_properties(p)["last_enqueued_sequence_number"] for p in client.get_partition_ids()}
    for group in consumers:
        for partition, seq in last.items():
            behind = min(seq, lag_at(group, now, rng))
            store.update_checkpoint({"fully_qualified_namespace": endpoint.fully_qualified_namespace,
                                     "eventhub_name": endpoint.eventhub_name, "consumer_group": group,
                                     "partition_id": partition, "sequence_number": seq - behind,
                                     "offset": str(seq - behind)})


def run_the_hour(airflow: AirflowStandalone, now: datetime) -> str:
    """Trigger the hourly DAG for the hour before ``now`` and wait for it; its run id."""
    airflow.wait_for_dag(DAG_ID, timeout=300)
    hour = bucket_start(now - timedelta(hours=1), 3600)
    triggered = airflow.post(f"/dags/{DAG_ID}/dagRuns", json={"logical_date": hour.isoformat()})
    triggered.raise_for_status()
    airflow.wait_for_runs(DAG_ID, 1, timeout=600)
    return str(triggered.json()["dag_run_id"])


def shoot(airflow: AirflowStandalone, run_id: str, out: Path) -> list[Path]:
    """The view of the hub ``orders``, its trends and a publish task's tab, in headless Chromium logged in as
    Airflow's admin."""
    from urllib.parse import quote

    import httpx
    from cdp import Chromium

    token = httpx.get(f"{airflow.base}/auth/token", timeout=30).json()["access_token"]
    browser = Chromium(WORK / "chromium", width=1400, height=1000)
    page = None
    try:
        page = browser.page()
        page.call("Network.enable")
        page.call("Network.setCookie", name="_token", value=token, url=airflow.base)
        page.goto(f"{airflow.base}/eventhubs/?conn_id=azure_event_hubs_default&hub=orders")
        page.wait_for("document.querySelectorAll('#producers tr.producer-row').length > 0", timeout=120)
        page.wait_for("document.querySelectorAll('.lag-chart').length > 0", timeout=120)  # the consumer groups' bars
        page.wait_for("document.getElementById('trends-section').dataset.readAt", timeout=180)
        page.wait_for("!document.body.innerText.includes('still being read')", timeout=120)
        view = page.screenshot(out / "eventhubs-view.png")
        page.eval("document.getElementById('trends-section').scrollIntoView()")
        page.wait_for("window.scrollY > 0")
        trends = page.screenshot(out / "eventhubs-trends.png")
        page.goto(f"{airflow.base}/dags/{DAG_ID}/runs/{quote(run_id, safe='')}/tasks/publish_orders")
        tab = "Array.from(document.querySelectorAll('a')).find(a => a.textContent.trim() === 'Event Hubs')"
        page.wait_for(f"{tab} !== undefined", timeout=120)
        page.eval(f"{tab}.click()")
        inside = "document.querySelector('iframe[src*=\"/eventhubs/tab?\"]').contentDocument"
        page.wait_for(f"{inside} && {inside}.body && {inside}.body.dataset.loaded === 'true'", timeout=120)
        return [view, trends, page.screenshot(out / "eventhubs-tab.png")]
    finally:
        if page is not None:
            page.close()
        browser.stop()


def main(argv: list[str] | None = None) -> int:
    """Seed the day, serve the view, take the pictures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs", help="where the pictures go (default docs/)")
    parser.add_argument("--seed", type=int, default=56, help="the seed of the day's data")
    args = parser.parse_args(argv)
    rng, now = random.Random(args.seed), datetime.now(UTC)
    if WORK.exists():
        import shutil

        shutil.rmtree(WORK)
    WORK.mkdir(parents=True)
    with ExitStack() as stack:
        azurite = AzuriteProcess(WORK / "azurite", port=_port(10000)).start()
        stack.callback(azurite.stop)
        event_hubs = EmulatorProcess(WORK / "eh", port=_port(5672), hubs={h: spec[0] for h, spec in HUBS.items()},
                                     consumer_groups={h: list(spec[3]) for h, spec in HUBS.items()})
        event_hubs.start()
        stack.callback(event_hubs.stop)
        service = BlobServiceClient.from_connection_string(azurite.connection_string)
        for container in (STATE, CHECKPOINTS):
            service.create_container(container)
        seed_day(event_hubs, azurite.connection_string, rng, now)
        port = free_port()
        env = standalone_env(WORK / "airflow", port)
        env.update({
            "AIRFLOW__CORE__DAGS_FOLDER": str(WORK / "dags"),
            "AIRFLOW_CONN_AZURE_EVENT_HUBS_DEFAULT": json.dumps({"conn_type": "azure_event_hubs", "extra": {
                "connection_string": event_hubs.connection_string(), "state_container": STATE,
                "checkpoint_container": CHECKPOINTS}}),
            "AIRFLOW_CONN_WASB_DEFAULT": json.dumps({"conn_type": "wasb",
                                                     "extra": {"connection_string": azurite.connection_string}}),
            "AIRFLOW__AZURE_EVENT_HUBS__VIEW_HISTORY_READ_SECONDS": "600",
        })
        (WORK / "dags").mkdir()
        (WORK / "dags" / f"{DAG_ID}.py").write_text(DAG_FILE)
        (WORK / "airflow").mkdir()
        airflow = AirflowStandalone(env, port, WORK / "standalone.log")
        stack.callback(airflow.stop)
        airflow.start()
        run_id = run_the_hour(airflow, now)
        for path in shoot(airflow, run_id, args.out):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
