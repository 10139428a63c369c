"""The Event Hubs tab on Airflow's task-instance pages: what one task instance published, waited for or ingested.

Registered as an external view with destination ``task_instance``
(:mod:`~airflow_provider_eh.plugins.event_hubs_view`): Airflow's UI shows it as a tab on every task
instance page and loads ``/eventhubs/tab`` in a frame with the task instance in the query (the
``{DAG_ID}``, ``{RUN_ID}``, ``{TASK_ID}`` and ``{MAP_INDEX}`` placeholders of the view's ``href``).
Airflow cannot restrict a tab to some operators, so the page says plainly when a task is none of
the package's. ``GET /eventhubs/api/task-instance`` (:mod:`~airflow_provider_eh.plugins.routes.tab`)
answers with, by kind of task (told by its template fields in the DAG version it ran with, so subclasses count):

- a **publish** task (``EventHubPublishOperator``, ``SparkToEventHubOperator`` and subclasses): its
  XCom (per partition: outcome, events, sequence range, fence, what recovery found) beside its
  batch's ledger entry per partition (committed, pending or partial; when; by which try), with a
  link to the ledger's history in the view;
- a **checkpoint sensor**: each consumer group's checkpoint against the target, per partition, read now;
- an **ingest** task: rows, duplicates, dead letters and checkpoints per partition, from its XCom.

Authorisation is the view's web layer (:mod:`~airflow_provider_eh.plugins.web`): Airflow's ``get_user``
(401 without), the auth manager's permission to read the DAG's task instances and each connection
the task names (403 otherwise); every answer is scrubbed of those connections' secrets and of what
Airflow's masker holds.
"""

from __future__ import annotations

import ast
import html
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from airflow_provider_eh.errors import ViewReadError
from airflow_provider_eh.plugins import links
from airflow_provider_eh.plugins.cache import Cache
from airflow_provider_eh.plugins.readers.ledgers import producer_state_blobs
from airflow_provider_eh.plugins.readers.reading import Reading, Source, iso, partition_sort_key
from airflow_provider_eh.plugins.urls import URL_PREFIX, base_path
from airflow_provider_eh.publishing.blob_store import BlobProducerStateStore
from airflow_provider_eh.publishing.document import StateKey

STATIC = Path(__file__).with_name("static")
#: the template fields that tell each kind of task, whatever its class is called
KINDS: tuple[tuple[str, frozenset[str]], ...] = (
    ("publish", links.PUBLISH_FIELDS),
    ("checkpoint_sensor", frozenset({"checkpoint_container", "consumer_groups", "targets", "event_hubs_conn_id",
                                     "wasb_conn_id"})),
    # a sensor of a DAG version serialized before 1.1.0, whose container field had the old name
    ("checkpoint_sensor", frozenset({"container", "consumer_groups", "targets", "event_hubs_conn_id", "wasb_conn_id"})),
    ("ingest", frozenset({"table", "sql_conn_id", "consumer_group", "checkpoint_container", "event_hubs_conn_id"})),
)
#: the operators' defaults, for fields a task instance that has not run yet leaves unrendered
DEFAULTS = {"event_hubs_conn_id": "azure_event_hubs_default", "wasb_conn_id": "wasb_default", "generation": 0,
            "consumer_group": "$Default", "consumer_groups": "$Default"}
NOT_OURS = "This task is not one of the Event Hubs provider's publish, checkpoint sensor or ingest tasks: nothing to show."

_TASKS = Cache(None, 4096)  # (dag version id, task id) -> (kind, operator, fields); a DAG version never changes


def task_kind(template_fields: Any) -> str | None:
    """``"publish"``, ``"checkpoint_sensor"``, ``"ingest"`` or ``None``, by a task's template fields."""
    fields = set(template_fields or ())
    return next((kind for kind, needed in KINDS if needed <= fields), None)


def serialized_task(data: Mapping[str, Any], task_id: str) -> dict[str, Any] | None:
    """A task of a serialized DAG, with a mapped task's arguments merged in."""
    dag = data.get("dag", data)
    for entry in dag.get("tasks") or []:
        task = entry.get("__var", entry) if isinstance(entry, dict) else None
        if isinstance(task, dict) and task.get("task_id") == task_id:
            return {**(task.get("partial_kwargs") or {}), **task}
    return None


def as_list(value: Any) -> list[str]:
    """One name or several, as a DAG or a rendered template gives them (``"a"``, ``["a", "b"]``, ``"['a', 'b']"``)."""
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            return [value]
    if isinstance(value, str):
        return [value] if value else []
    return [str(v) for v in value or () if v]


def render_tab(base: str) -> str:
    """The tab's page for an Airflow served at ``base`` (a path ending in ``/``)."""
    view = f"{base}{URL_PREFIX.strip('/')}/"
    return (STATIC / "tab.html").read_text().replace("{{ view_base }}", html.escape(view, quote=True))


def view_link(**params: Any) -> str:
    """A link to the Event Hubs view showing ``params`` (those given)."""
    query = urlencode({k: v for k, v in params.items() if v not in (None, "", [])})
    return f"{base_path()}{URL_PREFIX.strip('/')}/?{query}"


class TaskInstanceFacts:
    """What the metadata database says of one task instance: its kind, template fields, run and XCom."""

    def __init__(self, dag_id: str, run_id: str, task_id: str, map_index: int):
        self.dag_id, self.run_id, self.task_id, self.map_index = dag_id, run_id, task_id, map_index
        self.kind: str | None = None
        self.operator: str | None = None
        self.fields: dict[str, Any] = {}
        self.rendered = False
        self.state: str | None = None
        self.try_number: int | None = None
        self.interval: tuple[Any, Any, Any] = (None, None, None)
        self.returned: Any = None

    def load(self) -> TaskInstanceFacts:
        from sqlalchemy import select

        from airflow.models.dagrun import DagRun
        from airflow.models.renderedtifields import RenderedTaskInstanceFields as Rendered
        from airflow.models.taskinstance import TaskInstance as TI
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session

        with create_session() as session:
            row = session.execute(
                select(TI.dag_version_id, TI.state, TI.try_number, DagRun.data_interval_start, DagRun.data_interval_end,
                       DagRun.logical_date)
                .join(DagRun, (DagRun.dag_id == TI.dag_id) & (DagRun.run_id == TI.run_id))
                .where(TI.dag_id == self.dag_id, TI.run_id == self.run_id, TI.task_id == self.task_id,
                       TI.map_index == self.map_index)
            ).first()
            if row is None:
                raise ViewReadError(f"no task instance {self.task_id!r} (map index {self.map_index}) in run "
                                    f"{self.run_id!r} of DAG {self.dag_id!r}", 404)
            version, state, self.try_number, *interval = row
            self.state = None if state is None else str(getattr(state, "value", state))
            self.interval = (interval[0], interval[1], interval[2])
            self.kind, self.operator, declared = _TASKS.get((str(version), self.task_id),
                                                            lambda: _task(session, version, self.task_id))
            if self.kind is None:
                return self
            rendered = session.scalar(select(Rendered.rendered_fields).where(
                Rendered.dag_id == self.dag_id, Rendered.run_id == self.run_id, Rendered.task_id == self.task_id,
                Rendered.map_index == self.map_index))
            self.rendered = isinstance(rendered, dict)
            self.fields = {**DEFAULTS, **declared, **(rendered if isinstance(rendered, dict) else {})}
            xcom = session.scalars(XComModel.get_many(
                run_id=self.run_id, key="return_value", task_ids=self.task_id, dag_ids=self.dag_id,
                map_indexes=self.map_index)).first()
            self.returned = None if xcom is None else XComModel.deserialize_value(xcom)
        return self

    def text(self, name: str) -> str | None:
        value = self.fields.get(name)
        return None if value in (None, "", "None") or links.is_template(value) else str(value)

    def connection_ids(self) -> list[str]:
        ids = [self.text("event_hubs_conn_id")]
        if self.kind == "publish" and self.blob_backend():
            ids.append(self.text("wasb_conn_id"))
        if self.kind == "checkpoint_sensor" or (self.kind == "ingest" and self.text("checkpoint_container")):
            ids.append(self.text("wasb_conn_id"))
        if self.kind == "ingest":
            ids.append(self.text("sql_conn_id"))
        return [i for i in dict.fromkeys(ids) if i]

    def blob_backend(self) -> bool:
        return (self.text("state_backend") or ("blob" if self.text("state_container") else "variable")) == "blob"

    def about(self) -> dict[str, Any]:
        """The task instance as the tab names it, with a word for a task that is none of the package's."""
        return {"dag_id": self.dag_id, "run_id": self.run_id, "task_id": self.task_id, "map_index": self.map_index,
                "state": self.state, "try_number": self.try_number, "operator": self.operator, "kind": self.kind,
                "message": None if self.kind else NOT_OURS}

    def source(self) -> Source:
        """The state the task's kind reads: its hub, and for a publish task its state container."""
        return Source(event_hubs_conn_id=self.text("event_hubs_conn_id") or "", eventhub_name=self.text("eventhub_name"),
                      wasb_conn_id=self.text("wasb_conn_id") or "wasb_default",
                      state_container=self.text("state_container") if self.kind == "publish" else None)


def _task(session: Any, version: Any, task_id: str) -> tuple[str | None, str | None, dict[str, Any]]:
    from sqlalchemy import select

    from airflow.models.serialized_dag import SerializedDagModel

    row = session.scalar(select(SerializedDagModel).where(SerializedDagModel.dag_version_id == version))
    data = row.data if row is not None else None
    task = serialized_task(data, task_id) if isinstance(data, dict) else None
    if task is None:
        return None, None, {}
    kind = task_kind(task.get("template_fields"))
    declared = {name: task[name] for name in task.get("template_fields") or () if name in task}
    return kind, task.get("task_type") or task.get("_task_type"), declared


def publish_tab(facts: TaskInstanceFacts, reading: Reading,
                may_read_variable: Callable[[str], bool] = lambda key: False) -> dict[str, Any]:
    """A publish task instance's batch per partition: its XCom beside its ledger entry (in the state container, or in
    the Airflow Variables the user may read)."""
    returned: Mapping[str, Any] = facts.returned if isinstance(facts.returned, Mapping) else {}
    group = facts.text("producer_group") or f"{facts.dag_id}.{facts.task_id}"
    try:
        generation = int(facts.text("generation") or 0)
    except ValueError:
        generation = None
    start, end, logical = facts.interval
    batch_id = None if generation is None else links.PublishRun(
        facts.dag_id, facts.task_id, facts.run_id, facts.map_index, start, end, logical).batch_id(group, generation)
    blob = facts.blob_backend()
    ledger: dict[str, dict[str, Any]] = {}
    hub = facts.text("eventhub_name")
    readable = False  # whether the ledger was read (a blob backend's container known, the Variables allowed)
    if batch_id is not None and blob and facts.text("state_container"):
        hub, readable = reading.endpoint.eventhub_name, True
        ledger = _ledger_entries(reading, *_blob_ledgers(reading, group), group, batch_id, set(returned))
    elif batch_id is not None and not blob:
        hub = reading.endpoint.eventhub_name
        store, found, denied = _variable_ledgers(reading, group, set(returned), may_read_variable)
        if not denied:
            readable = True
            ledger = _ledger_entries(reading, store, found, group, batch_id, set(returned))
    rows: list[dict[str, Any]] = []
    for pid in sorted(set(returned) | set(ledger), key=partition_sort_key):
        found_row = returned.get(pid)
        result: Mapping[str, Any] = found_row if isinstance(found_row, Mapping) else {}
        entry = ledger.get(pid, {"state": "absent" if readable else "not read"})
        row = {k: result.get(k) for k in PUBLISH_RESULT}
        if row["events"] is None:  # no result (the task failed or runs): the ledger's count
            row["events"] = entry.get("events")
        link = None
        if readable:
            link = view_link(conn_id=facts.text("event_hubs_conn_id"), hub=hub, history_group=group, history_partition=pid,
                             **({"wasb_conn_id": facts.text("wasb_conn_id"), "state_container": facts.text("state_container")}
                                if blob else {"history_backend": "variable"}))
        rows.append({"partition": pid, **row, "ledger": entry, "ledger_link": link})
    return {"hub": hub, "producer_group": group, "generation": generation, "batch_id": batch_id,
            "state_backend": "blob" if blob else "variable", "returned": bool(returned),
            "events": sum(int(r["events"] or 0) for r in rows), "partitions": rows}


#: what a publish task returns per partition, shown as it is
PUBLISH_RESULT = ("status", "events", "first_seq", "last_seq", "service_last_sequence_number", "fencing",
                  "lease_only_batch_bytes", "landed", "resent", "readback_seconds")


def _blob_ledgers(reading: Reading, group: str) -> tuple[Any, set[str]]:
    """The state container's store and the partitions with a state of ``group``."""
    endpoint = reading.endpoint
    container = reading.container(reading.source.state_container or "")
    found = {b.partition for b in producer_state_blobs(container, endpoint.namespace, endpoint.eventhub_name)
             if b.group.lower() == group.lower()}
    return BlobProducerStateStore(container), found


def _variable_ledgers(reading: Reading, group: str, partitions: set[str],
                      may_read: Callable[[str], bool]) -> tuple[Any, set[str], bool]:
    """A read-only store over the Airflow Variables holding ``group``'s states on the task's hub, the partitions
    with one, and whether the user may not read one of them (then nothing of the ledger is shown)."""
    from airflow_provider_eh.plugins.readers.variables import hub_states, state_key, store_of

    endpoint = reading.endpoint
    denied = any(not may_read(state_key(group, pid)) for pid in partitions)
    states = hub_states(endpoint.namespace, endpoint.eventhub_name, may_read, group)
    return store_of(states), {s.partition for s in states}, denied


def _ledger_entries(reading: Reading, store: Any, found: set[str], group: str, batch_id: str,
                    partitions: set[str]) -> dict[str, dict[str, Any]]:
    """Per partition of ``group`` (``found`` with a state in ``store``, and ``partitions``): the batch's entry in
    its ledger."""
    endpoint = reading.endpoint
    entries = {}
    for pid in sorted(found | partitions, key=partition_sort_key):
        key = StateKey.of(endpoint, group, pid)
        state = store.read(key)
        committed = store.find_committed(key, batch_id)
        if committed is not None:
            origin = committed.origin or {}
            entries[pid] = {"state": "committed", "events": committed.events, "first_seq": committed.first_seq,
                            "last_seq": committed.last_seq, "committed_at": committed.committed_at,
                            "ordinal": committed.ordinal, "owner_level": committed.owner_level,
                            "fencing": committed.fencing, "try_number": origin.get("try_number")}
        elif state is not None and state.pending is not None and state.pending.batch_id == batch_id:
            entries[pid] = {"state": "pending", "events": state.pending.events, "since": iso_text(state.pending.started_at),
                            "try_number": (state.pending.origin or {}).get("try_number")}
        elif state is not None and batch_id in state.partial:
            part = state.partial[batch_id]
            entries[pid] = {"state": "partial", "events": part.events,
                            "landed": sum(stop - start for start, stop in part.landed or []),
                            "try_number": (part.origin or {}).get("try_number")}
        elif state is not None or pid in partitions:
            entries[pid] = {"state": "absent"}
    return entries


def iso_text(value: Any) -> Any:
    """A time as the ledger wrote it (text) or as ISO 8601."""
    return value if isinstance(value, str) or value is None else iso(value)


def sensor_tab(facts: TaskInstanceFacts) -> dict[str, Any]:
    """A checkpoint sensor's consumer groups against its targets, per partition, read now."""
    from airflow_provider_eh.hooks.checkpoints import CheckpointHook
    from airflow_provider_eh.sensors.checkpoint import parse_targets

    groups = as_list(facts.fields.get("consumer_groups"))
    container = facts.text("checkpoint_container") or facts.text("container")  # the old name: an older DAG version
    if not container or not groups:
        raise ViewReadError("the sensor's container or consumer groups are not known (templated, and the task instance "
                            "has not rendered them yet)", 409)
    raw_targets = facts.fields.get("targets")
    try:
        targets = parse_targets(raw_targets) if facts.rendered or not links.is_template(raw_targets) else None
    except ValueError:
        targets = None
    hook = CheckpointHook(container=container, event_hubs_conn_id=facts.text("event_hubs_conn_id") or "",
                          wasb_conn_id=facts.text("wasb_conn_id") or "", eventhub_name=facts.text("eventhub_name"))
    last = hook.last_enqueued(targets)
    progress = hook.progress(targets if targets is not None else dict(last), groups, last)
    rows = [{k: lag.to_dict()[k] for k in ("consumer_group", "target", "checkpoint", "remaining", "reached", "last_enqueued")}
            | {"partition": lag.partition_id} for lag in progress.lags]
    rows.sort(key=lambda r: (r["consumer_group"], partition_sort_key(r["partition"])))
    return {"hub": progress.eventhub_name, "container": container, "consumer_groups": groups,
            "targets_from": "the task's targets" if targets is not None else "everything enqueued now (the task waits for "
            "what was enqueued when it started)", "reached": progress.reached,
            "groups_without_checkpoints": list(progress.groups_without_checkpoints), "partitions": rows,
            "returned": facts.returned if isinstance(facts.returned, Mapping) else None,
            "view_link": view_link(conn_id=facts.text("event_hubs_conn_id"), hub=progress.eventhub_name,
                                   wasb_conn_id=facts.text("wasb_conn_id"), checkpoint_container=container,
                                   consumer_groups=",".join(groups))}


INGEST_COUNTS = ("start", "checkpoint", "target", "batches", "events", "rows", "duplicates", "dead_letters", "deferred")


def ingest_tab(facts: TaskInstanceFacts) -> dict[str, Any]:
    """An ingest task instance's rows, dead letters and checkpoints per partition, from its XCom."""
    returned: Mapping[str, Any] = facts.returned if isinstance(facts.returned, Mapping) else {}
    found = returned.get("partitions")
    partitions: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    rows: list[dict[str, Any]] = [
        {"partition": pid, **{k: p.get(k) if isinstance(p, Mapping) else None for k in INGEST_COUNTS}}
        for pid, p in sorted(partitions.items(), key=lambda item: partition_sort_key(item[0]))
    ]
    totals = {k: sum(int(r[k] or 0) for r in rows) for k in ("events", "rows", "duplicates", "dead_letters", "batches")}
    return {"hub": facts.text("eventhub_name"), "consumer_group": facts.text("consumer_group"), "table": facts.text("table"),
            "sql_conn_id": facts.text("sql_conn_id"), "checkpoint_container": facts.text("checkpoint_container"),
            "returned": bool(returned), "owner_id": returned.get("owner_id"), "totals": totals, "partitions": rows,
            "view_link": view_link(conn_id=facts.text("event_hubs_conn_id"), hub=facts.text("eventhub_name"),
                                   wasb_conn_id=facts.text("wasb_conn_id"),
                                   checkpoint_container=facts.text("checkpoint_container"),
                                   sql_conn_id=facts.text("sql_conn_id"), sink_consumer_group=facts.text("consumer_group"))}


def tab_answer(facts: TaskInstanceFacts, reading: Reading, may_read_variable: Callable[[str], bool]) -> dict[str, Any]:
    """What the tab shows of a task instance of one of the package's kinds, read through ``reading`` (which then
    holds the secrets of every connection the task names, for the scrub)."""
    for conn_id in facts.connection_ids():
        reading.connection(conn_id)
    about = facts.about()
    if facts.kind == "publish":
        return {**about, "publish": publish_tab(facts, reading, may_read_variable)}
    if facts.kind == "checkpoint_sensor":
        return {**about, "checkpoint_sensor": sensor_tab(facts)}
    return {**about, "ingest": ingest_tab(facts)}
