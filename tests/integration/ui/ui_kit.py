"""One `airflow standalone` with the Event Hubs view, and the state it shows, for the API and browser tests (fixture `view_stack`).

The instance is served under a sub-path (``[api] base_url`` ending in ``/airflow``) and uses the simple
auth manager with two users of its own, ``admin`` (role admin) and ``viewer`` (role viewer: no access
to connections), passwords in a file of its own. Its Event Hubs endpoint checks SAS tokens against a
key made for this run and its Azurite account has a key made for this run (``KEYS``), so a test can
look for them in every answer; connections with wrong keys (``eh_refused``, ``wasb_refused``) reach
the same services. Before the tests run, the hub gets:

* stamped events with two poison events;
* a publish killed after writing its intent, then another batch of the same group (``replay``) on
  partition 2: the killed one is left partial; three one-event batches of group ``history`` on partition 1;
* all of that ingested by ``analytics``; then a publish by a subclass of ``EventHubPublishOperator``
  with a templated ``generation`` of 1 in a DAG run of the instance (group ``eh_view_publish.publish``),
  so ``analytics`` lags by the DAG's events; the same run then ingests the hub as ``airflow-ingest`` into
  a sink of its own (the two poison events dead-lettered, checkpoints in a container of its own), a
  checkpoint sensor waits for that group to reach what the publish returned, and a plain ``@task`` ends it;
* a publish killed after writing its intent (group ``backfill``): a pending batch;
* everything ingested by ``$Default`` (two dead letters ``rejected``); both consumers mirror their
  checkpoints to the checkpoint container in the SDK's layout;
* last, checkpoints of ``backlog`` written by the SDK's ``BlobCheckpointStore`` at sequence number 1
  of every partition: a group behind by a backlog enqueued before its checkpoint was written.

Two more hubs of the namespace, for the view to find by itself: ``VARIABLES_HUB``, published to by a
second DAG on the Airflow Variables state backend (group ``eh_view_variables.publish``; nothing else
names the hub), and ``CHECKPOINT_HUB``, named only by the checkpoints of group ``audit``. The
connection ``azure_event_hubs_default`` names the blob connection and the state container in its
extra fields, and ``[azure_event_hubs] view_checkpoint_container`` and ``view_wasb_conn_id`` name the
checkpoint container and the blob connection for every connection:
the page opened with nothing in its URL finds everything.
"""

from __future__ import annotations

import base64
import json
import secrets
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from azure.eventhub import EventData, EventHubProducerClient
from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore
from azure.storage.blob import BlobServiceClient

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from eventhubs_local import EmulatorProcess
from airflow_provider_eh.ingest import BatchProcessor, IngestRun, RunLimits, SqlIngestStore, Stream
from airflow_provider_eh.publishing import derive_batch_id
from eventhubs_local.azurite import AzuriteProcess
from eventhubs_local.ports import free_port
from tests.support.standalone import AirflowStandalone, standalone_env

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "publishing"))
from publish_kit import PublishSetup  # noqa: E402

DAG_ID = "eh_view_publish"
VARIABLES_DAG_ID = "eh_view_variables"
VARIABLES_PARTITIONS, VARIABLES_EVENTS = 2, 6
CHECKPOINT_GROUP = "audit"
PARTITIONS = 4
DAG_EVENTS = 8  # two per partition
STAMPED = 5  # per partition
LOGICAL_DATE = "2026-11-02T00:00:00+00:00"
BASE_PATH = "/airflow"  # the instance is served under a sub-path
REPLAY_PARTITION, REPLAY_PARTIAL_EVENTS, REPLAY_EVENTS = "2", 3, 2
HISTORY_BATCHES = 3  # one-event batches of group ``history`` on partition 1: a ledger of more than one page
BACKLOG_CHECKPOINT = 1  # the backlog group processed the first two events of every partition
INGEST_GROUP = "airflow-ingest"  # the DAG's ingest task reads as this group, into its own sink

MARK = uuid.uuid4().hex[:12]
ACCOUNT = "viewacct"
KEYS = {
    "SAS key": f"EhViewKey-{MARK}",
    "refused SAS key": f"WrongEhViewKey-{MARK}",
    "account key": base64.b64encode(f"WasbViewKey-{MARK}".encode()).decode(),
    "refused account key": base64.b64encode(f"WrongWasbViewKey-{MARK}".encode()).decode(),
}

# A team's own subclass with a templated generation: the view links its batches all the same. Then the
# hub is ingested as ``INGEST_GROUP`` (poison events dead-lettered) and a checkpoint sensor waits for that
# group to reach what was published: the three kinds of task instance the Event Hubs tab describes.
DAG_FILE = '''
from airflow.sdk import DAG, task
from airflow_provider_eh.operators.ingest import EventHubIngestOperator
from airflow_provider_eh.operators.publish import EventHubPublishOperator
from airflow_provider_eh.sensors.checkpoint import EventHubCheckpointSensor


class AuditedPublishOperator(EventHubPublishOperator):
    """Another class name, the same publishing."""


def row(event):
    body = event.json()
    if body.get("poison"):
        raise ValueError("poison event %s" % body["id"])
    return {{"id": body["id"], "partition_id": event.partition_id, "sequence_number": event.sequence_number}}


with DAG("{dag_id}", schedule=None, catchup=False, params={{"generation": 1}}):
    publish = AuditedPublishOperator(
        task_id="publish", event_hubs_conn_id="eh_view", eventhub_name="{hub}", wasb_conn_id="wasb_view",
        state_container="{state}", generation="{{{{ params.generation }}}}",
        events=[{{"body": {{"id": "d-%d" % i}}, "partition_id": str(i % {partitions})}} for i in range({events})],
    )
    ingest = EventHubIngestOperator(
        task_id="ingest", table="events", sql_conn_id="sink_dag", row_function=row, event_hubs_conn_id="eh_view",
        eventhub_name="{hub}", consumer_group="{ingest_group}", wasb_conn_id="wasb_view",
        checkpoint_container="{dag_checkpoints}", max_wait_time=0.3,
    )
    sensor = EventHubCheckpointSensor(
        task_id="wait_for_ingest", checkpoint_container="{dag_checkpoints}", consumer_groups=["{ingest_group}"],
        targets=publish.output, eventhub_name="{hub}", event_hubs_conn_id="eh_view", wasb_conn_id="wasb_view",
        poke_interval=1, timeout=120,
    )

    @task
    def report():
        return "not an Event Hubs task"

    publish >> ingest >> sensor >> report()
'''

# The Airflow Variables state backend: no state_container.
VARIABLES_DAG_FILE = '''
from airflow.sdk import DAG
from airflow_provider_eh.operators.publish import EventHubPublishOperator

with DAG("{dag_id}", schedule=None, catchup=False):
    EventHubPublishOperator(
        task_id="publish", event_hubs_conn_id="eh_view", eventhub_name="{hub}", state_backend="variable",
        events=[{{"body": {{"id": "v-%d" % i}}, "partition_id": str(i % {partitions})}} for i in range({events})],
    )
'''


class UserStandalone(AirflowStandalone):
    """The harness's standalone under :data:`BASE_PATH`, logged in as ``admin`` with a password (not the all-admins token)."""

    passwords: dict[str, str]

    def __init__(self, env: dict[str, str], port: int, log: Path):
        super().__init__(env, port, log)
        self.origin = self.base
        self.base = f"{self.origin}{BASE_PATH}"

    def token(self, user: str) -> str:
        response = httpx.post(f"{self.base}/auth/token", json={"username": user, "password": self.passwords[user]}, timeout=10)
        response.raise_for_status()
        return response.json()["access_token"]

    def login(self) -> None:
        token = self.token("admin")
        if self.client is not None:
            self.client.close()
        self.client = httpx.Client(base_url=f"{self.base}/api/v2", headers={"Authorization": f"Bearer {token}"}, timeout=120)


def poison_row(event: Any) -> dict[str, Any]:
    body = event.json()
    if body.get("poison"):
        raise ValueError(f"poison event {body['id']}")
    return {"id": body["id"], "partition_id": event.partition_id, "sequence_number": event.sequence_number}


@dataclass
class ViewStack:
    airflow: UserStandalone
    hub: str
    variables_hub: str
    checkpoint_hub: str
    state_container: str
    checkpoint_container: str
    sink_db: Path
    dag_sink_db: Path  # the DAG's ingest task's sink
    eh_conn_str: str
    blob_conn_str: str
    crashed_batch: str
    partial_batch: str
    stamped_sent: tuple[float, float]  # wall clock before and after the stamped events were sent
    backlog_checkpointed: float  # wall clock when the backlog group's checkpoints had been written
    out: Path
    params: dict[str, str] = field(default_factory=dict)

    def view(self, path: str, token: str | None = None, **params: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.get(f"{self.airflow.base}/eventhubs{path}", params={**self.params, **params}, headers=headers, timeout=120)


def _blob_conn_str(port: int, key: str) -> str:
    return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={key};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{ACCOUNT};")


def _ingest(eh_conn_str: str, hub: str, group: str, sink_db: Path, container: Any) -> dict[str, Any]:
    endpoint = EventHubsEndpoint.from_connection_string(eh_conn_str, hub)
    store = SqlIngestStore(sqlite3.connect(sink_db), Stream(endpoint.namespace, endpoint.eventhub_name, group))
    try:
        run = IngestRun(endpoint, group, store, BatchProcessor("events", poison_row), owner_id=f"view-{group}",
                        container_client=container, limits=RunLimits(batch_size=50, max_wait_time=0.3, max_duration=60))
        return run.run()
    finally:
        store.close()


def _stamped_events(eh_conn_str: str, hub: str) -> None:
    with EventHubProducerClient.from_connection_string(eh_conn_str, eventhub_name=hub) as producer:
        for pid in range(PARTITIONS):
            batch = producer.create_batch(partition_id=str(pid))
            for i in range(STAMPED):
                body = {"id": f"s{pid}-{i}", **({"poison": True} if i == 2 and pid in (1, 2) else {})}
                event = EventData(json.dumps(body))
                event.properties = {"eh.group": "stamps", "eh.seq": i, "eh.batch": "b0", "eh.owner": 1}
                batch.add(event)
            producer.send_batch(batch)


@pytest.fixture(scope="module")
def view_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ViewStack]:
    out = tmp_path_factory.mktemp("ui")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AZURITE_ACCOUNTS", f"{ACCOUNT}:{KEYS['account key']}")
        azurite = AzuriteProcess(out / "azurite").start()
    event_hubs = EmulatorProcess(out / "eh", extra_args=["--require-auth", "--fsync", "never"], key_name="viewer",
                                 key=KEYS["SAS key"])
    try:
        event_hubs.start()
        yield from _stack(out, event_hubs, azurite)
    finally:
        event_hubs.stop()
        azurite.stop()


def _stack(out: Path, event_hubs: EmulatorProcess, azurite: AzuriteProcess) -> Iterator[ViewStack]:
    hub = f"hub-{uuid.uuid4().hex[:12]}"
    event_hubs.admin.create_hub(hub, partitions=PARTITIONS, consumer_groups=["analytics", INGEST_GROUP])
    variables_hub, checkpoint_hub = f"vars-{uuid.uuid4().hex[:12]}", f"audited-{uuid.uuid4().hex[:12]}"
    event_hubs.admin.create_hub(variables_hub, partitions=VARIABLES_PARTITIONS)
    event_hubs.admin.create_hub(checkpoint_hub, partitions=1, consumer_groups=[CHECKPOINT_GROUP])
    blob_conn_str = _blob_conn_str(azurite.port, KEYS["account key"])
    blob = SimpleNamespace(connection_string=blob_conn_str)  # what PublishSetup reads of an Azurite
    service = BlobServiceClient.from_connection_string(blob_conn_str)
    state_container, checkpoint_container = f"state-{uuid.uuid4().hex[:10]}", f"cp-{uuid.uuid4().hex[:10]}"
    service.create_container(state_container)
    checkpoints = service.create_container(checkpoint_container)
    eh_conn_str = event_hubs.connection_string(hub)
    refused_eh = eh_conn_str.replace(f"SharedAccessKey={KEYS['SAS key']}", f"SharedAccessKey={KEYS['refused SAS key']}")
    assert refused_eh != eh_conn_str
    sink_db, dag_sink_db = out / "sink.db", out / "dag_sink.db"
    for db in (sink_db, dag_sink_db):
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE events (id TEXT NOT NULL, partition_id TEXT NOT NULL, sequence_number BIGINT NOT NULL)")

    dags = out / "dags"
    dags.mkdir()
    (dags / "eh_view_publish.py").write_text(DAG_FILE.format(
        dag_id=DAG_ID, hub=hub, state=state_container, partitions=PARTITIONS, events=DAG_EVENTS,
        ingest_group=INGEST_GROUP, dag_checkpoints=f"dag-{checkpoint_container}"))
    (dags / "eh_view_variables.py").write_text(VARIABLES_DAG_FILE.format(
        dag_id=VARIABLES_DAG_ID, hub=variables_hub, partitions=VARIABLES_PARTITIONS, events=VARIABLES_EVENTS))
    home = out / "airflow-home"
    home.mkdir()
    passwords = {"admin": secrets.token_urlsafe(12), "viewer": secrets.token_urlsafe(12)}
    (home / "passwords.json").write_text(json.dumps(passwords))
    port = free_port()
    env = standalone_env(home, port)
    env.update({
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}{BASE_PATH}",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}{BASE_PATH}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW_CONN_EH_VIEW": json.dumps({"conn_type": "azure_event_hubs", "extra": {"connection_string": eh_conn_str}}),
        # the view's defaults: blob connection and state container from the connection, checkpoints from the configuration
        "AIRFLOW_CONN_AZURE_EVENT_HUBS_DEFAULT": json.dumps({"conn_type": "azure_event_hubs", "extra": {
            "connection_string": eh_conn_str, "wasb_conn_id": "wasb_view", "state_container": state_container}}),
        "AIRFLOW__AZURE_EVENT_HUBS__VIEW_CHECKPOINT_CONTAINER": checkpoint_container,
        "AIRFLOW__AZURE_EVENT_HUBS__VIEW_WASB_CONN_ID": "wasb_view",
        # the tests compare a first trends answer with every record: no time bound on a loaded machine
        "AIRFLOW__AZURE_EVENT_HUBS__VIEW_HISTORY_READ_SECONDS": "600",
        "AIRFLOW_CONN_EH_REFUSED": json.dumps({"conn_type": "azure_event_hubs", "extra": {"connection_string": refused_eh}}),
        "AIRFLOW_CONN_WASB_VIEW": json.dumps({"conn_type": "wasb", "extra": {"connection_string": blob_conn_str}}),
        "AIRFLOW_CONN_WASB_REFUSED": json.dumps({"conn_type": "wasb", "extra": {
            "connection_string": _blob_conn_str(azurite.port, KEYS["refused account key"])}}),
        "AIRFLOW_CONN_SINK_VIEW": json.dumps({"conn_type": "sqlite", "host": str(sink_db)}),
        "AIRFLOW_CONN_SINK_DAG": json.dumps({"conn_type": "sqlite", "host": str(dag_sink_db)}),
    })
    airflow = UserStandalone(env, port, out / "standalone.log")
    airflow.passwords = passwords
    setup = PublishSetup(event_hubs, blob, hub, state_container)
    partial_batch = derive_batch_id("replay", "manual", "replay", logical_date="2026-10-31T00:00:00+00:00")
    stamped_sent: list[float] = []

    # the stamped events, the partial batch and the analytics consumer, while the instance starts
    prep_error: list[BaseException] = []

    def prepare() -> None:
        try:
            stamped_sent.append(time.time())
            _stamped_events(eh_conn_str, hub)
            stamped_sent.append(time.time())
            killed = setup.start([{"body": {"id": f"r-{i}"}, "partition_id": REPLAY_PARTITION} for i in range(REPLAY_PARTIAL_EVENTS)],
                                 partial_batch, group="replay", crash_at="after_intent")
            killed.communicate(timeout=120)
            assert killed.returncode == -9, f"the replay publish was to be killed after its intent, exit code {killed.returncode}"
            code, _, err = setup.run([{"body": {"id": f"r2-{i}"}, "partition_id": REPLAY_PARTITION} for i in range(REPLAY_EVENTS)],
                                     derive_batch_id("replay", "manual", "replay", logical_date="2026-11-01T00:00:00+00:00"),
                                     group="replay", claim_timeout=60)  # waits out the killed one's lease
            assert code == 0, err[-3000:]
            history = setup.publisher("history")
            for day in range(1, HISTORY_BATCHES + 1):
                history.publish([{"body": {"id": f"h{day}"}, "partition_id": "1"}],
                                batch_id=derive_batch_id("history", "manual", "h", logical_date=f"2026-10-{day:02d}"))
            _ingest(eh_conn_str, hub, "analytics", out / "analytics.db", checkpoints)
        except BaseException as exc:  # re-raised below
            prep_error.append(exc)

    with sqlite3.connect(out / "analytics.db") as conn:
        conn.execute("CREATE TABLE events (id TEXT NOT NULL, partition_id TEXT NOT NULL, sequence_number BIGINT NOT NULL)")
    prep = threading.Thread(target=prepare)
    prep.start()
    try:
        airflow.start()
        prep.join()
        if prep_error:
            raise prep_error[0]
        for dag_id in (DAG_ID, VARIABLES_DAG_ID):  # one after the other: the metadata DB is SQLite
            airflow.wait_for_dag(dag_id, timeout=120)
            triggered = airflow.client.post(f"/dags/{dag_id}/dagRuns", json={"logical_date": LOGICAL_DATE})
            assert triggered.status_code == 200, triggered.text
            airflow.wait_for_runs(dag_id, 1, timeout=180)

        crashed_batch = derive_batch_id("backfill", "manual", "backfill", logical_date="2026-11-01T00:00:00+00:00")
        events = [{"body": {"id": f"b-{i}"}, "partition_id": "3"} for i in range(5)]
        proc = setup.start(events, crashed_batch, group="backfill", crash_at="after_intent")
        proc.communicate(timeout=120)
        assert proc.returncode == -9, f"the publish was to be killed after its intent, exit code {proc.returncode}"

        _ingest(eh_conn_str, hub, "$Default", sink_db, checkpoints)
        store = BlobCheckpointStore.from_connection_string(blob_conn_str, checkpoint_container)
        for pid in range(PARTITIONS):  # what the SDK's processor writes (its offset is informative only)
            store.update_checkpoint({
                "fully_qualified_namespace": f"127.0.0.1:{event_hubs.port}", "eventhub_name": hub,
                "consumer_group": "backlog", "partition_id": str(pid),
                "sequence_number": BACKLOG_CHECKPOINT, "offset": str(BACKLOG_CHECKPOINT),
            })
        with EventHubProducerClient.from_connection_string(eh_conn_str, eventhub_name=checkpoint_hub) as producer:
            producer.send_batch([EventData("a0"), EventData("a1")], partition_id="0")
        store.update_checkpoint({  # a hub nothing else names: found through this checkpoint's path
            "fully_qualified_namespace": f"127.0.0.1:{event_hubs.port}", "eventhub_name": checkpoint_hub,
            "consumer_group": CHECKPOINT_GROUP, "partition_id": "0", "sequence_number": 0, "offset": "0",
        })
        stack = ViewStack(airflow, hub, variables_hub, checkpoint_hub, state_container, checkpoint_container, sink_db, dag_sink_db, eh_conn_str,
                          blob_conn_str, crashed_batch, partial_batch, (stamped_sent[0], stamped_sent[1]), time.time(), out)
        stack.params = {
            "conn_id": "eh_view", "hub": hub, "wasb_conn_id": "wasb_view", "state_container": state_container,
            "checkpoint_container": checkpoint_container, "sql_conn_id": "sink_view",
        }
        yield stack
    finally:
        prep.join()
        airflow.stop()
