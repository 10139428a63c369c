"""Which task instance published a batch the Event Hubs view shows, for the DAGs the user may read.

A batch published by this version's operators names its task instance in the ledger (``origin``:
dag, task, run and map index): :func:`origin_links` reads its run's interval and returns it. For a
batch written before ledgers carried ``origin`` (or by a publisher that passed none), the view derives, for each
publishing task instance, the id that task instance publishes
(:func:`~airflow_provider_eh.publishing.batch_id.derive_batch_id` over the values its operator used)
and matches it against the ledger's. What it takes from where:

- which tasks publish: those of the DAGs' latest serialized versions whose template fields include
  the publishing operators' (:data:`PUBLISH_FIELDS`), so the package's operators and any subclass,
  whatever its class is called;
- a task instance's producer group and ``generation``: as serialized in the DAG version it ran
  with, or, when they are templated, as Airflow rendered them for it. Groups set per partition
  (``partition_options``) are not serialized: ledger groups that no publishing task declares are
  tried against every publishing task instance;
- the data interval, logical date, run id and map index: from the task instance and its DAG run.

Only DAGs whose task instances the user may read (the auth manager's answer, per DAG and team) are
looked at. Task instances are read newest first until every batch is found, at most
:data:`SCAN_LIMIT` of them. No link, then, for a batch published outside Airflow, by a task
instance older than that, or with a templated group or generation whose rendering Airflow no longer
keeps (``[core] max_num_rendered_ti_fields_per_task`` runs per task).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from airflow_provider_eh.plugins.access import DAG_TASK_INSTANCES, readable
from airflow_provider_eh.plugins.cache import Cache
from airflow_provider_eh.plugins.readers.reading import iso

#: the template fields every publishing operator (and subclass) has
PUBLISH_FIELDS = frozenset({"producer_group", "generation", "state_container", "event_hubs_conn_id"})
SCAN_LIMIT = 20_000
CHUNK = 500

_VERSION_TASKS = Cache(None, 4096)  # dag version id -> {task_id: PublishFields}; a DAG version never changes


def is_template(value: Any) -> bool:
    """Whether ``value`` is Jinja template text that Airflow renders at run time."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)


@dataclass(frozen=True)
class PublishFields:
    """A publishing task's producer group and generation as its DAG declares them: values, or template text."""

    producer_group: Any = None
    generation: Any = 0

    def resolve(self, dag_id: str, task_id: str, rendered: Mapping[str, Any] | None) -> tuple[str, int] | None:
        """``(group, generation)`` a task instance used; ``None`` when a templated one was not rendered or is no number."""
        group, generation = self.producer_group, self.generation
        if is_template(group) or is_template(generation):
            if rendered is None:
                return None
            group = rendered.get("producer_group") if is_template(group) else group
            generation = rendered.get("generation") if is_template(generation) else generation
        try:
            number = int(generation or 0)
        except (TypeError, ValueError):
            return None
        return (group or f"{dag_id}.{task_id}", number)

    @property
    def templated(self) -> bool:
        return is_template(self.producer_group) or is_template(self.generation)


def publish_tasks(serialized_dag: Mapping[str, Any]) -> dict[str, PublishFields]:
    """``task_id -> PublishFields`` of a serialized DAG's publishing tasks (mapped ones included)."""
    dag = serialized_dag.get("dag", serialized_dag)
    found = {}
    for entry in dag.get("tasks") or []:
        task = entry.get("__var", entry) if isinstance(entry, dict) else None
        if not isinstance(task, dict) or not PUBLISH_FIELDS <= set(task.get("template_fields") or ()):
            continue
        values = {**(task.get("partial_kwargs") or {}), **task}  # a mapped task keeps its arguments in partial_kwargs
        found[task["task_id"]] = PublishFields(values.get("producer_group"), values.get("generation", 0))
    return found


@dataclass(frozen=True)
class PublishRun:
    """One task instance of a publishing task, with what its batch id is derived from."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    interval_start: datetime | None
    interval_end: datetime | None
    logical_date: datetime | None

    def batch_id(self, group: str, generation: int) -> str:
        from airflow_provider_eh.publishing.batch_id import derive_batch_id

        return derive_batch_id(
            group, self.dag_id, self.task_id, interval_start=self.interval_start, interval_end=self.interval_end,
            logical_date=self.logical_date, run_id=self.run_id,
            map_index=-1 if self.map_index is None else self.map_index, generation=generation,
        )

    def link(self) -> dict[str, Any]:
        return {
            "dag_id": self.dag_id, "task_id": self.task_id, "run_id": self.run_id, "map_index": self.map_index,
            "interval_start": iso(self.interval_start), "interval_end": iso(self.interval_end),
            "logical_date": iso(self.logical_date),
        }


def match_batches(
    runs: Iterable[tuple[PublishRun, PublishFields, Mapping[str, Any] | None]],
    wanted: Mapping[str, str],
    undeclared_groups: Collection[str] = (),
) -> dict[str, dict[str, Any]]:
    """``batch id -> link`` for the ``wanted`` batches (``batch id -> group``) that one of ``runs`` publishes.

    Each run is tried with its own group and generation, and with the ``undeclared_groups``; reading
    ``runs`` stops once every batch is found (the newest run publishing a batch wins).
    """
    found: dict[str, dict[str, Any]] = {}
    if not wanted:
        return found
    for run, fields, rendered in runs:
        resolved = fields.resolve(run.dag_id, run.task_id, rendered)
        if resolved is None:
            continue
        group, generation = resolved
        for candidate in {group, *undeclared_groups}:
            batch_id = run.batch_id(candidate, generation)
            if batch_id in wanted and batch_id not in found:
                found[batch_id] = run.link()
        if len(found) == len(wanted):
            break
    return found


ORIGIN_FIELDS = ("dag_id", "task_id", "run_id")


def is_origin(origin: Any) -> bool:
    """Whether a ledger entry's ``origin`` names an Airflow task instance."""
    return isinstance(origin, dict) and all(isinstance(origin.get(f), str) and origin.get(f) for f in ORIGIN_FIELDS)


def origin_links(
    recorded: Mapping[str, Mapping[str, Any]], may_read: Callable[[Collection[str]], set[str]],
) -> dict[str, dict[str, Any]]:
    """``batch id -> link`` of the batches whose ledger entry names its task instance (``origin``), for
    the DAGs ``may_read`` keeps; the interval and logical date come from the task instance's DAG run."""
    if not recorded:
        return {}
    readable = may_read(sorted({o["dag_id"] for o in recorded.values()}))
    mine = {batch_id: o for batch_id, o in recorded.items() if o["dag_id"] in readable}
    if not mine:
        return {}
    from sqlalchemy import select, tuple_

    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    keys = {(o["dag_id"], o["run_id"]) for o in mine.values()}
    with create_session() as session:
        runs = {
            (dag_id, run_id): (start, end, logical)
            for dag_id, run_id, start, end, logical in session.execute(
                select(DagRun.dag_id, DagRun.run_id, DagRun.data_interval_start, DagRun.data_interval_end, DagRun.logical_date)
                .where(tuple_(DagRun.dag_id, DagRun.run_id).in_(sorted(keys)))
            )
        }
    found = {}
    for batch_id, o in mine.items():
        start, end, logical = runs.get((o["dag_id"], o["run_id"]), (None, None, None))
        map_index = o.get("map_index")
        found[batch_id] = PublishRun(
            o["dag_id"], o["task_id"], o["run_id"], -1 if map_index is None else int(map_index), start, end, logical,
        ).link()
    return found


def readable_dags(manager: Any, user: Any, teams: Mapping[str, str | None]) -> set[str]:
    """The DAGs (``dag_id -> team``) whose task instances ``user`` may read, as the auth manager says."""
    return set(readable(DAG_TASK_INSTANCES, manager, user, teams))


def link_batches(batches: list[tuple[str, dict[str, Any]]], may_read: Callable[[Collection[str]], set[str]]) -> None:
    """Give each ``(group, batch)``'s batch its ``task_instance`` link (``None`` where the user may not read
    the DAG or none is found), in place of its ``origin``."""
    wanted: dict[str, str] = {}  # batches that do not name their task instance: found by their derived ids
    recorded: dict[str, dict[str, Any]] = {}  # batches whose ledger entry names it
    for group, batch in batches:
        origin = batch.pop("origin", None)
        if is_origin(origin):
            recorded[batch["batch_id"]] = origin
        else:
            wanted[batch["batch_id"]] = group
    found = {**task_instance_links(wanted, may_read), **origin_links(recorded, may_read)}
    for _, batch in batches:
        batch["task_instance"] = found.get(batch["batch_id"])


def _version_tasks(session: Any, version_id: Any) -> dict[str, PublishFields]:
    from sqlalchemy import select

    from airflow.models.serialized_dag import SerializedDagModel

    def load() -> dict[str, PublishFields]:
        row = session.scalar(select(SerializedDagModel).where(SerializedDagModel.dag_version_id == version_id))
        data = row.data if row is not None else None
        return publish_tasks(data) if isinstance(data, dict) else {}

    return _VERSION_TASKS.get(str(version_id), load)


def _latest_versions(session: Any) -> dict[str, Any]:
    from sqlalchemy import func, select

    from airflow.models.dag_version import DagVersion

    newest = (select(DagVersion.dag_id, func.max(DagVersion.version_number).label("number"))
              .group_by(DagVersion.dag_id).subquery())
    rows = session.execute(
        select(DagVersion.dag_id, DagVersion.id)
        .join(newest, (DagVersion.dag_id == newest.c.dag_id) & (DagVersion.version_number == newest.c.number))
    ).all()
    return dict(rows)


def task_instance_links(
    wanted: Mapping[str, str], may_read: Callable[[Collection[str]], set[str]], scan_limit: int = SCAN_LIMIT,
) -> dict[str, dict[str, Any]]:
    """``batch id -> {dag_id, task_id, run_id, map_index, interval_start, interval_end, logical_date}`` of the
    task instances that publish the ``wanted`` batches (``batch id -> producer group``), among the publishing
    task instances of the DAGs ``may_read`` keeps."""
    from airflow.utils.session import create_session

    if not wanted:
        return {}
    with create_session() as session:
        publishing = _readable_publishing_tasks(session, may_read)
        if not publishing:
            return {}
        undeclared = set(wanted.values()) - _declared_groups(publishing)
        return match_batches(_publish_runs(session, publishing, scan_limit), wanted, undeclared)


def _readable_publishing_tasks(
    session: Any, may_read: Callable[[Collection[str]], set[str]],
) -> dict[str, dict[str, PublishFields]]:
    """``dag_id -> {task_id: PublishFields}`` of the publishing tasks in the latest versions of the DAGs ``may_read`` keeps."""
    latest = {dag_id: _version_tasks(session, version) for dag_id, version in _latest_versions(session).items()}
    publishing = {dag_id: tasks for dag_id, tasks in latest.items() if tasks}
    allowed = may_read(sorted(publishing)) if publishing else set()
    return {dag_id: tasks for dag_id, tasks in publishing.items() if dag_id in allowed}


def _declared_groups(publishing: Mapping[str, Mapping[str, PublishFields]]) -> set[str]:
    """The producer groups the publishing tasks declare (not templated), their default ``<dag>.<task>`` included."""
    return {
        fields.producer_group or f"{dag_id}.{task_id}"
        for dag_id, tasks in publishing.items() for task_id, fields in tasks.items() if not is_template(fields.producer_group)
    }


def _publish_runs(
    session: Any, publishing: Mapping[str, Mapping[str, PublishFields]], scan_limit: int,
) -> Iterator[tuple[PublishRun, PublishFields, Mapping[str, Any] | None]]:
    """The task instances of the ``publishing`` tasks, newest first and ``scan_limit`` at most, each with its task's
    fields (as in the DAG version it ran with) and, for a templated one, what Airflow rendered for it."""
    for chunk in _pages(session, _publishing_instances(publishing), scan_limit):
        rows = []
        for dag_id, task_id, run_id, map_index, version, start, end, logical in chunk:
            fields = (_version_tasks(session, version) if version else {}).get(task_id) or publishing[dag_id].get(task_id)
            if fields is not None:
                rows.append((PublishRun(dag_id, task_id, run_id, map_index, start, end, logical), fields))
        rendered = _rendered_fields(session, [run for run, fields in rows if fields.templated])
        for run, fields in rows:
            yield run, fields, rendered.get((run.dag_id, run.task_id, run.run_id, run.map_index))


def _publishing_instances(publishing: Mapping[str, Mapping[str, PublishFields]]) -> Any:
    """The query of the ``publishing`` tasks' instances with their runs' intervals, newest first."""
    from sqlalchemy import select

    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance as TI

    task_ids = {task_id for tasks in publishing.values() for task_id in tasks}
    return (
        select(TI.dag_id, TI.task_id, TI.run_id, TI.map_index, TI.dag_version_id,
               DagRun.data_interval_start, DagRun.data_interval_end, DagRun.logical_date)
        .join(DagRun, (DagRun.dag_id == TI.dag_id) & (DagRun.run_id == TI.run_id))
        .where(TI.dag_id.in_(list(publishing)), TI.task_id.in_(list(task_ids)))
        .order_by(TI.start_date.desc().nullslast(), TI.id)
    )


def _pages(session: Any, query: Any, scan_limit: int) -> Iterator[Sequence[Any]]:
    """The rows of ``query``, :data:`CHUNK` at a time, ``scan_limit`` at most."""
    for offset in range(0, scan_limit, CHUNK):
        page = session.execute(query.offset(offset).limit(min(CHUNK, scan_limit - offset))).all()
        if page:
            yield page
        if len(page) < CHUNK:
            return


def _rendered_fields(session: Any, runs: list[PublishRun]) -> dict[tuple[str, str, str, int], Any]:
    """``(dag, task, run, map index) -> rendered fields`` that Airflow keeps for ``runs``."""
    from sqlalchemy import select

    from airflow.models.renderedtifields import RenderedTaskInstanceFields as Rendered

    if not runs:
        return {}
    rows = session.execute(
        select(Rendered.dag_id, Rendered.task_id, Rendered.run_id, Rendered.map_index, Rendered.rendered_fields)
        .where(Rendered.dag_id.in_({r.dag_id for r in runs}), Rendered.task_id.in_({r.task_id for r in runs}),
               Rendered.run_id.in_({r.run_id for r in runs}))
    )
    return {(dag_id, task_id, run_id, map_index): values for dag_id, task_id, run_id, map_index, values in rows}
