"""What a small publish costs on a young ledger and on an old one, on both state backends, and its fixed cost.

Starts its own local Event Hubs endpoint, Azurite and an Airflow metadata database (SQLite, in a temp
``AIRFLOW_HOME``), creates a hub of one partition, and for each backend (``blob`` on Azurite,
``variable``: Airflow Variables in the metadata database) and each history length of ``--histories``
(default 0, 26,280 = hourly for three years, and 100,000 = every five minutes for a year) gives a
producer group that many committed batches, written as the engine writes them (a record by batch id
and one by ordinal each, and the state document counting them). Then the median time of ``--repeat``
publishes of ``--events`` events (each a new batch) through
:class:`~airflow_provider_eh.publishing.IdempotentPublisher` on every group, in rounds that publish
once on each group in turn, and the size of the largest object the group has in storage (a blob, or
a Variable's value).

What a publish costs in storage is counted too, and that is the figure that shows whether it depends
on history: the requests it makes to storage and the bytes they move (blob: every HTTP request of
the store's client; Variables: every get, set and delete), per publish, at each length.

Azurite keeps its blob metadata in an in-memory collection by default, whose look-ups scan the
account: a GET of a missing blob takes 1.6 ms in an empty account and 4 ms beside 20,000 blobs, where
Azure's own index does not slow. With ``--azurite-metadata mariadb`` (the default) Azurite keeps it in
a throwaway MariaDB instead (``AZURITE_DB``), indexed as a real service's is, so that the time ratio
shows the engine's growth and not the emulator's; ``--azurite-metadata memory`` measures the default
Azurite. ``azurite_get_ms_<n>``, the median GET of a missing blob at each length, prints the floor.

The fixed cost, in the same run: the median of ``--repeat`` publishes of the same ``--events`` events
through the engine on a fresh group vs. through a plain SDK producer (connect, ``send_batch``, close).

The last line is ``ratio_<backend>_<n>=<publish time on a ledger of n batches / on an empty one> ...
requests_<backend>_<n>=<storage requests per publish> bytes_<backend>_<n>=<bytes moved per publish> ...
largest_<backend>_<n>=<bytes> ... azurite_get_ms_<n>=... fixed_cost=<engine / plain SDK> engine_s=... sdk_s=...``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

HOME = tempfile.mkdtemp(prefix="bench-ledger-airflow-")
os.environ.update({  # before Airflow is imported: its metadata database for the Variables backend
    "AIRFLOW_HOME": HOME, "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME}/airflow.db", "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
})

from azure.core.exceptions import ResourceNotFoundError  # noqa: E402
from azure.eventhub import EventData  # noqa: E402
from azure.storage.blob import BlobServiceClient, ContainerClient  # noqa: E402

from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher, StateKey  # noqa: E402
from airflow_provider_eh.publishing.claim import StateClaim  # noqa: E402
from airflow_provider_eh.publishing.document import ProducerState  # noqa: E402
from airflow_provider_eh.publishing.records import BATCH, HISTORY, CommittedBatch, Ledger, history_name, record_name  # noqa: E402
from airflow_provider_eh.publishing.state import ProducerStateStore  # noqa: E402
from eventhubs_local import EmulatorProcess  # noqa: E402
from eventhubs_local.azurite import AzuriteProcess  # noqa: E402

EVENTS_PER_SEEDED_BATCH = 100


def make_events(n: int, tag: str) -> list[dict[str, Any]]:
    """``n`` events for partition 0, their ids tagged with ``tag``."""
    return [{"body": {"id": f"{tag}-{i}", "pad": "x" * 150}, "partition_id": "0"} for i in range(n)]


@contextmanager
def azurite_metadata(kind: str) -> Iterator[str | None]:
    """``AZURITE_DB`` for ``kind``: a database on a throwaway MariaDB server, or ``None`` (in memory)."""
    if kind == "memory":
        yield None
        return
    import pymysql

    from tests.support.databases import mariadb_server

    with mariadb_server() as server:
        if server is None:
            sys.exit("--azurite-metadata mariadb needs mariadb-server (make prerequisites); or pass --azurite-metadata memory")
        conn = pymysql.connect(host=server["host"], port=server["port"], user=server["user"])
        conn.cursor().execute("CREATE DATABASE azurite")
        conn.close()
        yield f"mysql://{server['user']}@{server['host']}:{server['port']}/azurite"


def seed(store: ProducerStateStore, key: StateKey, batches: int, write_records: Any) -> float:
    """Give ``key`` a ledger of ``batches`` committed batches, as the engine leaves it; returns the seconds it took."""
    started = time.perf_counter()
    now = "2026-01-01T00:00:00+00:00"
    records = [CommittedBatch(events=EVENTS_PER_SEEDED_BATCH, first_seq=i * 100, last_seq=i * 100 + 99,
                              service_last_sequence_number=i * 100 + 99, fingerprint="f" * 64, owner_level=1,
                              committed_at=now, batch_id=f"{i:064x}", ordinal=i) for i in range(batches)]
    # the records first, outside a claim (years of commits at once would outlast a lease), then the document
    write_records(StateClaim(key, ProducerState.new(key), None, "seed"), records)
    claim = store.claim(key)
    try:
        state = claim.state
        state.ledger = Ledger(next=batches, first=0, last=records[-1] if records else None)
        state.last_published_seq = batches * 100 - 1
        store.write(claim, state)
    finally:
        store.release(claim)
    return time.perf_counter() - started


def texts(records: list[CommittedBatch]) -> list[tuple[str, str, str]]:
    """The two ledger records (by batch id and by ordinal) of each committed batch, as ``put_record`` takes them."""
    out = []
    for r in records:
        text = json.dumps(r.to_doc(), separators=(",", ":"))
        out += [(BATCH, record_name(r.batch_id), text), (HISTORY, history_name(r.ordinal), text)]
    return out


def blob_records(store: BlobProducerStateStore) -> Any:
    """A writer of committed batches' records into the blob store, 16 at a time."""
    def write(claim: Any, records: list[CommittedBatch]) -> None:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda item: store.put_record(claim, *item), texts(records)))
    return write


def variable_records(claim: Any, records: list[CommittedBatch]) -> None:
    """Variables inserted in bulk (the engine writes one per commit; ten years of commits one by one would be the
    benchmark's whole time)."""
    from sqlalchemy import insert

    from airflow.models.variable import Variable
    from airflow.utils.session import create_session

    from airflow_provider_eh.hooks.producer_state import AirflowVariables
    from airflow_provider_eh.publishing import VariableProducerStateStore

    store = VariableProducerStateStore(AirflowVariables())
    rows = [{"key": store.record_variable_name(claim.key, kind, name), "val": text, "is_encrypted": False}
            for kind, name, text in texts(records)]
    with create_session() as session:
        for at in range(0, len(rows), 20_000):
            session.execute(insert(Variable.__table__), rows[at:at + 20_000])


def largest_blob(container: ContainerClient, key: StateKey) -> int:
    """The size of the largest blob of ``key``'s state: its document or a record."""
    sizes = [b.size for b in container.list_blobs(name_starts_with=key.blob_name)]
    prefix = key.record_blob_name(BATCH, "x").rsplit("/", 2)[0] + "/"
    sizes += [b.size for b in container.list_blobs(name_starts_with=prefix)]
    return max(sizes)


def largest_variable(store: Any, key: StateKey) -> int:
    """The size of the largest Airflow Variable of ``key``'s state: its document or a record."""
    from sqlalchemy import func, or_, select

    from airflow.models.variable import Variable
    from airflow.utils.session import create_session

    name = store.variable_name(key)
    with create_session() as session:
        return int(session.scalar(select(func.max(func.length(Variable.__table__.c.val))).where(
            or_(Variable.__table__.c.key == name, Variable.__table__.c.key.like(name + ".%")))))


class Counting:
    """The blob client's ``raw_response_hook``: counts its HTTP requests and the bytes they move (bodies sent,
    Content-Length received)."""

    def __init__(self) -> None:
        self.requests = self.bytes = 0

    def __call__(self, response: Any) -> None:
        body = response.http_request.body
        self.requests += 1
        self.bytes += len(body) if isinstance(body, (bytes, str)) else 0
        self.bytes += int(response.http_response.headers.get("Content-Length") or 0)


class CountingVariables:
    """Airflow Variables, counting the calls and the bytes of the values read and written."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.requests, self.bytes = inner, 0, 0

    def get(self, key: str) -> str | None:
        value = self.inner.get(key)
        self.requests += 1
        self.bytes += len(value or "")
        return value

    def set(self, key: str, value: str) -> None:
        self.inner.set(key, value)
        self.requests += 1
        self.bytes += len(value)

    def delete(self, key: str) -> None:
        self.inner.delete(key)
        self.requests += 1


def azurite_get_ms(container: ContainerClient) -> float:
    """The median time (ms) of one request to Azurite, the floor under every blob read."""
    times = []
    for i in range(25):
        started = time.perf_counter()
        try:
            container.get_blob_client(f"missing/{i}").download_blob().readall()
        except ResourceNotFoundError:
            pass
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def timed_publishes(publisher: IdempotentPublisher, repeat: int, events: int, tag: str) -> float:
    """Median seconds of ``repeat`` publishes of ``events`` events each, every one a new batch."""
    times = []
    for i in range(repeat):
        batch = make_events(events, f"{tag}-{i}")
        started = time.perf_counter()
        result = publisher.publish(batch, batch_id=f"{tag}-{i}")
        times.append(time.perf_counter() - started)
        assert {r.status for r in result.values()} == {"published"}, result
    return statistics.median(times)


def plain_sdk(endpoint: EventHubsEndpoint, repeat: int, events: int) -> float:
    """Median seconds of ``repeat`` plain SDK sends of ``events`` events, the ratio's baseline."""
    times = []
    for i in range(repeat):
        bodies = [json.dumps(e["body"]) for e in make_events(events, f"sdk-{i}")]
        started = time.perf_counter()
        with endpoint.plain_producer() as producer:
            batch = producer.create_batch(partition_id="0")
            for body in bodies:
                batch.add(EventData(body))
            producer.send_batch(batch)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    """Time one publish against ledgers of growing history on both backends and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", default="0,26280,100000", help="history lengths, comma-separated (0 first)")
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--azurite-metadata", choices=("mariadb", "memory"), default="mariadb",
                        help="where Azurite keeps its blob metadata: a MariaDB (indexed) or its in-memory collection")
    args = parser.parse_args()
    histories = [int(n) for n in args.histories.split(",")]
    assert histories[0] == 0, "the first history length is the empty ledger the others are compared with"
    logging.basicConfig(level=logging.WARNING)
    migrate = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True)
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    from airflow_provider_eh.hooks.producer_state import AirflowVariables
    from airflow_provider_eh.publishing import VariableProducerStateStore

    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-ledger-") as tmp, azurite_metadata(args.azurite_metadata) as db, \
            EmulatorProcess(Path(tmp) / "eh") as eh, AzuriteProcess(Path(tmp) / "azurite", metadata_db=db) as azurite:
        print(f"Azurite's blob metadata: {args.azurite_metadata}", flush=True)
        counting = Counting()
        container = BlobServiceClient.from_connection_string(
            azurite.connection_string, raw_response_hook=counting).create_container("ledger-state")
        counted_variables = CountingVariables(AirflowVariables())
        eh.admin.create_hub("ledger", partitions=1)
        endpoint = EventHubsEndpoint.from_connection_string(eh.connection_string("ledger"), "ledger")
        stores: dict[str, Any] = {"blob": BlobProducerStateStore(container),
                                  "variable": VariableProducerStateStore(counted_variables)}
        for backend, store in stores.items():
            write = blob_records(store) if backend == "blob" else variable_records
            counter: Any = counting if backend == "blob" else counted_variables
            publishers, keys, times = {}, {}, {n: [] for n in histories}
            for n in histories:  # every history first, then the publishes in rounds over all of them
                group = f"{backend}-{n}"
                keys[n] = StateKey(endpoint.namespace, "ledger", group, "0")
                seeded = seed(store, keys[n], n, write)
                publishers[n] = IdempotentPublisher(endpoint, store, producer_group=group)
                print(f"{backend:8} ledger of {n:>7} batches seeded in {seeded:6.1f}s", flush=True)
            # interleaved: what slows the machine or Azurite for a while (its periodic sweep of every blob,
            # another process) slows every length alike instead of the one measured at that moment
            counted = {n: [0, 0] for n in histories}
            floor = {n: [] for n in histories}
            for r in range(args.repeat):
                for n in histories:
                    before = (counter.requests, counter.bytes)
                    times[n].append(timed_publishes(publishers[n], 1, args.events, f"{backend}-{n}-{r}"))
                    counted[n][0] += counter.requests - before[0]
                    counted[n][1] += counter.bytes - before[1]
                    if backend == "blob":
                        floor[n].append(azurite_get_ms(container))
            for n in histories:
                figures[f"{backend}_{n}_s"] = statistics.median(times[n])
                figures[f"requests_{backend}_{n}"] = counted[n][0] / args.repeat
                figures[f"bytes_{backend}_{n}"] = counted[n][1] / args.repeat
                if backend == "blob":
                    figures[f"azurite_get_ms_{n}"] = statistics.median(floor[n])
                largest = largest_blob(container, keys[n]) if backend == "blob" else largest_variable(store, keys[n])
                figures[f"largest_{backend}_{n}"] = largest
                print(f"{backend:8} ledger of {n:>7} batches: one {args.events}-event publish "
                      f"{figures[f'{backend}_{n}_s'] * 1000:7.1f} ms (median of {args.repeat}, interleaved), "
                      f"{figures[f'requests_{backend}_{n}']:.1f} storage requests "
                      f"moving {figures[f'bytes_{backend}_{n}']:.0f} B, "
                      f"largest object {largest} B", flush=True)
        sdk_s = plain_sdk(endpoint, args.repeat, args.events)
        engine_s = timed_publishes(IdempotentPublisher(endpoint, stores["blob"], producer_group="fixed-cost"),
                                   args.repeat, args.events, "fixed")
    print(f"fixed cost of one {args.events}-event publish: engine {engine_s * 1000:.1f} ms, plain SDK {sdk_s * 1000:.1f} ms")
    ratios = " ".join(f"ratio_{b}_{n}={figures[f'{b}_{n}_s'] / figures[f'{b}_0_s']:.3f}"
                      for b in stores for n in histories[1:])
    counted = " ".join(f"{what}_{b}_{n}={figures[f'{what}_{b}_{n}']:.1f}" for what in ("requests", "bytes")
                       for b in stores for n in histories)
    largest = " ".join(f"largest_{b}_{n}={int(figures[f'largest_{b}_{n}'])}" for b in stores for n in histories)
    azurite = " ".join(f"azurite_get_ms_{n}={figures[f'azurite_get_ms_{n}']:.1f}" for n in histories)
    print(f"{ratios} {counted} {largest} {azurite} fixed_cost={engine_s / sdk_s:.3f} engine_s={engine_s:.3f} sdk_s={sdk_s:.3f}")


if __name__ == "__main__":
    main()
