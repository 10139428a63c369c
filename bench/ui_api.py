"""The Event Hubs view's API on a large hub vs. the raw blob reads it needs.

Starts its own local Event Hubs endpoint, Azurite and ``airflow standalone`` (the view's plugin
mounted in its API server), creates a hub of ``--partitions`` partitions, writes ``--groups``
producer groups' states with ``--entries`` committed ledger entries in all (spread over every group
and partition, one pending batch per group) and checkpoints of two consumer groups, then measures,
in the same run, the median of ``--repeat`` rounds of:

- ``raw``: what the view has to read: one listing of the state blobs, a download of each (16 at a
  time, as the view does), one checkpoint listing per consumer group and spelling of the namespace
  (with and without its port), and every partition's properties (from 8 clients at once, as the
  view does; the partition ids are read once before, as the view keeps them for a minute);
- ``api``: ``GET /eventhubs/api/overview`` through the API server (authentication, the same reads,
  decoding, task-instance links, scrubbing, JSON). Each round waits out the view's partition-properties
  cache first, so every round makes its reads.

The last line is ``ratio=<api/raw> api_s=... raw_s=...``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from azure.storage.blob import BlobServiceClient  # noqa: E402

from airflow_provider_eh.checkpoints.blob_layout import namespace_spellings  # noqa: E402
from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.plugins.readers.partitions import PROPERTIES_TTL, PROPERTY_CLIENTS  # noqa: E402
from airflow_provider_eh.publishing.document import ProducerState, StateKey  # noqa: E402
from airflow_provider_eh.publishing.records import CommittedBatch, Ledger, PendingIntent  # noqa: E402
from eventhubs_local import EmulatorProcess  # noqa: E402
from eventhubs_local.azurite import AzuriteProcess  # noqa: E402
from eventhubs_local.ports import free_port  # noqa: E402
from tests.support.standalone import AirflowStandalone, standalone_env  # noqa: E402

HUB, STATE, CHECKPOINTS = "bench-view", "bench-state", "bench-checkpoints"
CONSUMER_GROUPS = ("$Default", "analytics")


def write_states(container, namespace: str, partitions: int, groups: int, entries: int) -> None:
    """Producer-state documents for ``groups`` producer groups on every partition, ``entries`` ledger entries in all."""
    now = datetime.now(UTC).isoformat()
    per_blob = entries // (partitions * groups)
    extra = entries - per_blob * partitions * groups
    jobs = []
    for g in range(groups):
        for p in range(partitions):
            key = StateKey(namespace, HUB, f"group-{g}", str(p))
            state = ProducerState.new(key)
            state.owner_level = 3
            n = per_blob + (1 if g * partitions + p < extra else 0)
            # the overview reads state documents only: a ledger of n batches is its counters and its newest
            # record (the records themselves are read by the history pages, not benchmarked here)
            if n:
                state.ledger = Ledger(next=n, first=0, last=CommittedBatch(
                    events=100, first_seq=(n - 1) * 100, last_seq=n * 100 - 1, service_last_sequence_number=n * 100 - 1,
                    committed_at=now, batch_id=f"{g:02d}{p:02d}{n - 1:060d}", ordinal=n - 1,
                ))
            state.last_published_seq = n * 100 - 1
            if p == 0:
                state.pending = PendingIntent(
                    batch_id=f"pending-{g}", first_seq=n * 100, indexes=None, events=50, fingerprint="x",
                    owner_level=3, start_sequence_number=0, landed=[], started_at=now,
                )
            jobs.append((key.blob_name, state.to_json()))
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda job: container.upload_blob(job[0], job[1], overwrite=True), jobs))


def write_checkpoints(container, fqns: str, partitions: int) -> None:
    """A checkpoint blob per partition for every consumer group the benchmark reads."""
    for group in CONSUMER_GROUPS:
        for p in range(partitions):
            name = f"{fqns}/{HUB}/{group}/checkpoint/{p}".lower()
            container.upload_blob(name, b"", overwrite=True, metadata={"sequencenumber": "10", "offset": "100"})


def partition_properties(endpoint: EventHubsEndpoint, partition_ids: list[str]) -> int:
    """Every partition's properties, from PROPERTY_CLIENTS clients at once (one connection per request, as in the view)."""

    def share(ids: list[str]) -> int:
        with endpoint.producer(retry_total=1) as client:
            return len([client.get_partition_properties(pid) for pid in ids])

    shares = [s for s in (partition_ids[i::PROPERTY_CLIENTS] for i in range(PROPERTY_CLIENTS)) if s]
    with ThreadPoolExecutor(len(shares)) as pool:
        return sum(pool.map(share, shares))


def raw_reads(state, checkpoints, endpoint: EventHubsEndpoint, partition_ids: list[str]) -> int:
    """The reads the overview makes, done directly: state blobs, checkpoints and partition properties."""
    names = [b.name for b in state.list_blobs(name_starts_with=f"{endpoint.namespace}/{HUB}/".lower())]
    with ThreadPoolExecutor(2) as side:  # the hub's management requests and the blobs side by side, as in the view
        properties = side.submit(partition_properties, endpoint, partition_ids)
        with ThreadPoolExecutor(16) as pool:
            sizes = list(pool.map(lambda n: len(state.get_blob_client(n).download_blob().readall()), names))
        for group in CONSUMER_GROUPS:
            for namespace in namespace_spellings(endpoint.fully_qualified_namespace):
                list(checkpoints.list_blobs(name_starts_with=f"{namespace}/{HUB}/{group}/".lower(), include=["metadata"]))
        assert properties.result() == len(partition_ids)
    return sum(sizes)


def main() -> None:
    """Time the view's ``/api/overview`` against the same reads made directly and print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=32)
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as tmp_dir:
        tmp = Path(tmp_dir)
        with EmulatorProcess(tmp / "eh") as eh, AzuriteProcess(tmp / "azurite") as azurite:
            eh.admin.create_hub(HUB, partitions=args.partitions, consumer_groups=["analytics"])
            endpoint = EventHubsEndpoint.from_connection_string(eh.connection_string(HUB), HUB)
            service = BlobServiceClient.from_connection_string(azurite.connection_string)
            state, checkpoints = service.create_container(STATE), service.create_container(CHECKPOINTS)
            write_states(state, endpoint.namespace, args.partitions, args.groups, args.entries)
            write_checkpoints(checkpoints, endpoint.fully_qualified_namespace, args.partitions)

            home = tmp / "airflow-home"
            home.mkdir()
            port = free_port()
            env = standalone_env(home, port)
            env["AIRFLOW_CONN_EH_BENCH"] = json.dumps(
                {"conn_type": "azure_event_hubs", "extra": {"connection_string": eh.connection_string(HUB)}})
            env["AIRFLOW_CONN_WASB_BENCH"] = json.dumps(
                {"conn_type": "wasb", "extra": {"connection_string": azurite.connection_string}})
            env["AIRFLOW__CORE__DAGS_FOLDER"] = str(tmp / "dags")
            airflow = AirflowStandalone(env, port, tmp / "standalone.log")
            try:
                airflow.start()
                token = airflow.client.headers["Authorization"]
                params = {"conn_id": "eh_bench", "hub": HUB, "wasb_conn_id": "wasb_bench", "state_container": STATE,
                          "checkpoint_container": CHECKPOINTS, "consumer_groups": ",".join(CONSUMER_GROUPS)}
                with endpoint.producer() as client:
                    partition_ids = [str(p) for p in client.get_partition_ids()]
                api_times, raw_times = [], []
                body = None
                last_api = 0.0
                for _ in range(args.repeat + 1):  # the first round warms both up and is not counted
                    started = time.perf_counter()
                    size = raw_reads(state, checkpoints, endpoint, partition_ids)
                    raw_times.append(time.perf_counter() - started)
                    time.sleep(max(0.0, last_api + PROPERTIES_TTL + 0.2 - time.monotonic()))  # no cached properties
                    started = time.perf_counter()
                    response = httpx.get(f"{airflow.base}/eventhubs/api/overview", params=params,
                                         headers={"Authorization": token}, timeout=300)
                    api_times.append(time.perf_counter() - started)
                    last_api = time.monotonic()
                    response.raise_for_status()
                    body = response.json()
            finally:
                airflow.stop()
    ledgers = sum(len(g["partitions"]) for g in body["producer_groups"])
    committed = sum(p["committed_batches"] for g in body["producer_groups"] for p in g["partitions"])
    assert committed == args.entries and ledgers == args.partitions * args.groups, (committed, ledgers)
    api, raw = statistics.median(api_times[1:]), statistics.median(raw_times[1:])
    print(f"hub: {args.partitions} partitions, {args.groups} producer groups, {ledgers} state blobs "
          f"({size / 1024:.0f} KiB), {committed} ledger entries, {len(CONSUMER_GROUPS)} consumer groups")
    print(f"raw reads (blobs and partition properties): median {raw:.3f} s of {args.repeat}")
    print(f"view API /api/overview: median {api:.3f} s of {args.repeat} "
          f"(server-side {body['elapsed_seconds']} s: {body['timings']})")
    print(f"ratio={api / raw:.2f} api_s={api:.3f} raw_s={raw:.3f}")


if __name__ == "__main__":
    main()
