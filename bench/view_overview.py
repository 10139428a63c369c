"""The Event Hubs view's answers for a large namespace: the overview and the trends, against a 2-second target.

Starts its own local Event Hubs endpoint and Azurite (its blob metadata in a throwaway MariaDB by
default, indexed as Azure's is: see ``bench/ledger_history.py``) and an Airflow metadata database
(SQLite, in a temporary ``AIRFLOW_HOME``), and creates a hub of ``--partitions`` partitions with
``--events`` events on each, ``--consumer-groups`` consumer groups checkpointed at different positions,
``--producer-groups`` producer groups with ``--records`` history records each (spread over every
partition, committed one after another over the last ``--days`` days) and a day of lag samples, one
a minute. The ledgers are written in bulk, in the layout the ledger writes (a state document per
partition, a history record per ordinal); the run checks that the view reads them as the ledger's
records (``/api/history`` of one partition) before it measures.

Then, in this process, the answers of the view's two routes as their handlers build them (the reads,
the JSON and the scrubbing; the connections from ``AIRFLOW_CONN_*``; not the HTTP and authorisation
around them, which ``bench/ui_api.py`` measures through ``airflow standalone``): the overview (the
median of ``--repeat`` answers, each after the view's 2-second cache of partition properties has
expired), and the trends:
its first answer (nothing read before: the producer states and lag samples downloaded, and history
records read until ``view_history_read_seconds``, 1 s, after the answer began, new ones first), the answers after it
until the publish trend is complete, and the median of ``--repeat`` answers after that (what a person
sees once the history is read, as the view's sampler reads it in the background when on). The
overview's answers come after the trends': the producer states are the ones kept (a state is
downloaded again only when its ETag moved), as for anyone opening the view after another.

With ``--quiet-load L`` the run waits, once the ledgers are seeded (the long part: about an hour at the full
scale), until the machine's 1-minute load average is below ``L``, then writes the rest and measures.

The last line is ``overview_s=... trends_first_s=... trends_s=... ratio_overview=<overview / 2 s>
ratio_trends=<trends / 2 s> ratio_trends_first=<first trends answer / 2 s>``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# the view's answers look up task instances in Airflow's metadata database: one of the run's own, set before Airflow loads
AIRFLOW_HOME = tempfile.mkdtemp(prefix="bench-view-airflow-")
os.environ.update({"AIRFLOW_HOME": AIRFLOW_HOME, "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                   "AIRFLOW__CORE__DAGS_FOLDER": str(Path(AIRFLOW_HOME) / "dags")})

from azure.eventhub import EventData  # noqa: E402
from azure.storage.blob import BlobServiceClient  # noqa: E402
from ledger_history import azurite_metadata  # noqa: E402

from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.plugins.overview import DEFAULT_THRESHOLD  # noqa: E402
from airflow_provider_eh.plugins.overview import overview as hub_overview  # noqa: E402
from airflow_provider_eh.plugins.readers.ledgers import ledger_history  # noqa: E402
from airflow_provider_eh.plugins.readers.partitions import PROPERTIES_TTL  # noqa: E402
from airflow_provider_eh.plugins.readers.reading import Reading, Source  # noqa: E402
from airflow_provider_eh.plugins.redaction import scrub  # noqa: E402
from airflow_provider_eh.plugins.sampler import SamplingSettings  # noqa: E402
from airflow_provider_eh.plugins.samples import SampleStore, bucket_start, encode  # noqa: E402
from airflow_provider_eh.plugins.trends import trends  # noqa: E402
from airflow_provider_eh.publishing.document import ProducerState, StateKey  # noqa: E402
from airflow_provider_eh.publishing.records import HISTORY, CommittedBatch, Ledger, history_name  # noqa: E402
from eventhubs_local import EmulatorProcess  # noqa: E402
from eventhubs_local.azurite import AzuriteProcess  # noqa: E402

HUB, STATE, CHECKPOINTS = "bench-trends", "bench-state", "bench-checkpoints"
EVENTS_PER_RECORD = 100
TARGET_S = 2.0


def write_ledgers(container, namespace: str, partitions: int, groups: int, records: int, days: float) -> int:
    """``records`` history records per producer group, spread over the partitions and committed over ``days`` days up
    to now, with each ledger's state document; returns the blobs written."""
    now = datetime.now(UTC)
    span = timedelta(days=days)
    jobs: list[tuple[str, str]] = []
    for g in range(groups):
        for p in range(partitions):
            key = StateKey(namespace, HUB, f"producer-{g:02d}", str(p))
            n = records // partitions + (1 if p < records % partitions else 0)
            last = None
            for o in range(n):
                at = now - span * (1 - (o + 1) / n)  # oldest first, the newest now
                last = CommittedBatch(
                    events=EVENTS_PER_RECORD, first_seq=o * EVENTS_PER_RECORD, last_seq=(o + 1) * EVENTS_PER_RECORD - 1,
                    service_last_sequence_number=(o + 1) * EVENTS_PER_RECORD - 1, fingerprint="f" * 64, owner_level=1,
                    committed_at=at.isoformat(), batch_id=f"{g:02d}{p:02d}{o:060d}", ordinal=o,
                )
                jobs.append((key.record_blob_name(HISTORY, history_name(o)), json.dumps(last.to_doc(), separators=(",", ":"))))
            state = ProducerState.new(key)
            state.owner_level = 1
            state.ledger = Ledger(next=n, first=0, last=last)
            state.last_published_seq = n * EVENTS_PER_RECORD - 1
            jobs.append((key.blob_name, state.to_json()))
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda job: container.upload_blob(job[0], job[1], overwrite=True), jobs))
    return len(jobs)


def write_checkpoints(container, fqns: str, partitions: int, groups: list[str], events: int) -> None:
    """A checkpoint per partition for every consumer group, each group further behind than the one before."""
    jobs = []
    for i, group in enumerate(groups):
        for p in range(partitions):
            seq = max(0, events - 1 - i)
            jobs.append((f"{fqns}/{HUB}/{group}/checkpoint/{p}".lower(), {"sequencenumber": str(seq), "offset": str(seq)}))
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda job: container.upload_blob(job[0], b"", overwrite=True, metadata=job[1]), jobs))


def write_samples(container, endpoint: EventHubsEndpoint, partitions: int, groups: list[str]) -> int:
    """A day of lag samples, one a minute, through the sample store."""
    store = SampleStore(container, endpoint.namespace, endpoint.eventhub_name)
    now = bucket_start(datetime.now(UTC), 60)
    moments = [now - timedelta(minutes=m) for m in range(24 * 60)]

    def write(moment: datetime) -> bool:
        rows = [{"consumer_group": g, "partitions": [
            {"partition": str(p), "lag_events": (i * 7 + p + moment.minute) % 50, "lag_seconds": float(p)}
            for p in range(partitions)]} for i, g in enumerate(groups)]
        return store.write(moment, encode(moment, 60, rows))

    with ThreadPoolExecutor(16) as pool:
        return sum(pool.map(write, moments))


def send_events(endpoint: EventHubsEndpoint, partitions: int, events: int) -> None:
    """``events`` events on every partition: what the consumer groups lag behind."""
    with endpoint.producer() as producer:
        for p in range(partitions):
            batch = producer.create_batch(partition_id=str(p))
            for i in range(events):
                batch.add(EventData(f"event {i}"))
            producer.send_batch(batch)


def wait_for_quiet(load: float) -> None:
    """Return once the 1-minute load average is below ``load``, saying how long that took."""
    started = time.monotonic()
    while os.getloadavg()[0] >= load:
        time.sleep(15)
    print(f"load average {os.getloadavg()[0]:.2f} after waiting {time.monotonic() - started:.0f} s", flush=True)


def main() -> None:
    """Time the view's overview and trends answers for a large namespace and print them against the target."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--producer-groups", type=int, default=20)
    parser.add_argument("--records", type=int, default=10_000, help="history records per producer group")
    parser.add_argument("--days", type=float, default=14.0, help="the records' commits spread over this many days")
    parser.add_argument("--consumer-groups", type=int, default=10)
    parser.add_argument("--events", type=int, default=20, help="events per partition")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--azurite-metadata", choices=("mariadb", "memory"), default="mariadb")
    parser.add_argument("--quiet-load", type=float, default=None, metavar="L",
                        help="once the ledgers are seeded, wait until the 1-minute load average is below L before "
                             "writing the rest and measuring (seed beside other work, measure on a quiet machine)")
    args = parser.parse_args()
    consumer_groups = ["$Default", *[f"consumer-{i:02d}" for i in range(1, args.consumer_groups)]]
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True, timeout=900)
    with tempfile.TemporaryDirectory(prefix="bench-view-") as tmp_dir, azurite_metadata(args.azurite_metadata) as db:
        tmp = Path(tmp_dir)
        with EmulatorProcess(tmp / "eh") as eh, AzuriteProcess(tmp / "azurite", metadata_db=db) as azurite:
            eh.admin.create_hub(HUB, partitions=args.partitions, consumer_groups=consumer_groups[1:])
            endpoint = EventHubsEndpoint.from_connection_string(eh.connection_string(HUB), HUB)
            service = BlobServiceClient.from_connection_string(azurite.connection_string)
            state, checkpoints = service.create_container(STATE), service.create_container(CHECKPOINTS)
            started = time.perf_counter()
            blobs = write_ledgers(state, endpoint.namespace, args.partitions, args.producer_groups, args.records, args.days)
            print(f"wrote {blobs} ledger blobs in {time.perf_counter() - started:.0f} s", flush=True)
            if args.quiet_load is not None:
                wait_for_quiet(args.quiet_load)
            send_events(endpoint, args.partitions, args.events)
            write_checkpoints(checkpoints, endpoint.fully_qualified_namespace, args.partitions, consumer_groups, args.events)
            samples = write_samples(checkpoints, endpoint, args.partitions, consumer_groups)

            os.environ["AIRFLOW_CONN_EH_BENCH"] = json.dumps(
                {"conn_type": "azure_event_hubs", "extra": {"connection_string": eh.connection_string(HUB)}})
            os.environ["AIRFLOW_CONN_WASB_BENCH"] = json.dumps(
                {"conn_type": "wasb", "extra": {"connection_string": azurite.connection_string}})
            source = Source("eh_bench", HUB, "wasb_bench", STATE, CHECKPOINTS)
            settings = SamplingSettings()

            def answer(build) -> tuple[float, dict]:
                begin = time.perf_counter()
                reading = Reading(source)
                body = json.loads(json.dumps(scrub(build(reading), reading.secrets)))
                return time.perf_counter() - begin, body

            def overview_of(reading: Reading) -> dict:
                return hub_overview(reading, DEFAULT_THRESHOLD, lambda dag_ids: set())

            def trends_of(reading: Reading) -> dict:
                return trends(reading, settings, datetime.now(UTC), 24.0)

            # the ledgers written in bulk are the ledger's records to the view
            _, page = answer(lambda reading: ledger_history(reading, "producer-00", "0", None, 5))
            per_ledger = args.records // args.partitions + (1 if args.records % args.partitions else 0)
            assert page["total"] == per_ledger and [b["ordinal"] for b in page["batches"]] == list(
                range(per_ledger - 1, per_ledger - 6, -1)), page
            assert all(b["events"] == EVENTS_PER_RECORD for b in page["batches"]), page

            trends_first, first = answer(trends_of)
            rounds, body = 1, first
            while not body["published"]["complete"]:
                _, body = answer(trends_of)
                rounds += 1
            trends_times, overview_times = [], []
            last = 0.0
            for _ in range(args.repeat):
                took, body = answer(trends_of)
                trends_times.append(took)
                time.sleep(max(0.0, last + PROPERTIES_TTL + 0.2 - time.monotonic()))  # no cached partition properties
                took, overview = answer(overview_of)
                last = time.monotonic()
                overview_times.append(took)
    window_events = sum(b[1] for g in body["published"]["producer_groups"] for b in g["buckets"])
    lag_points = sum(len(p["points"]) for g in body["lag"]["consumer_groups"] for p in g["partitions"])
    ledgers = sum(len(g["partitions"]) for g in overview["producer_groups"])
    assert ledgers == args.partitions * args.producer_groups and len(overview["consumer_groups"]) == args.consumer_groups
    assert len(body["published"]["producer_groups"]) == args.producer_groups
    assert samples - 60 < body["lag"]["samples"] <= samples  # the oldest leave the window as the run goes on
    overview_s, trends_s = statistics.median(overview_times), statistics.median(trends_times)
    print(f"namespace: {args.partitions} partitions, {args.producer_groups} producer groups of {args.records:,} history "
          f"records over {args.days:g} days ({ledgers} ledgers), {args.consumer_groups} consumer groups, "
          f"{samples} lag samples (Azurite metadata: {args.azurite_metadata})")
    print(f"overview: median {overview_s:.3f} s of {args.repeat} (server-side {overview['elapsed_seconds']} s: "
          f"{overview['timings']})")
    print(f"trends, first answer: {trends_first:.3f} s, {first['published']['records_read']:,} history records read, "
          f"complete={first['published']['complete']} (server-side {first['elapsed_seconds']} s: {first['timings']}); "
          f"complete after {rounds} answers")
    print(f"trends: median {trends_s:.3f} s of {args.repeat} (server-side {body['elapsed_seconds']} s: {body['timings']}): "
          f"{window_events:,} events in the last 24 h, {lag_points:,} lag points")
    print(f"overview_s={overview_s:.3f} trends_first_s={trends_first:.3f} trends_s={trends_s:.3f} "
          f"ratio_overview={overview_s / TARGET_S:.2f} ratio_trends={trends_s / TARGET_S:.2f} "
          f"ratio_trends_first={trends_first / TARGET_S:.2f}")


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)
