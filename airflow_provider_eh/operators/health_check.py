"""A task that fails when a hub's publishing or consuming is stuck: an alert to wire to a notifier.

:class:`EventHubHealthCheckOperator` reads the ledgers of the producer groups it is given (either
state backend) and the checkpoints of the consumer groups it is given, once, and fails naming every
batch open longer than ``max_batch_age`` and every partition a consumer group is more than
``max_lag`` events behind on, with what to do about each. Scheduled every few minutes with an
``on_failure_callback`` (a Slack, e-mail or paging notifier), it is the alert. When nothing is
wrong it returns a summary: names and numbers, no connection's fields.

The decision is :func:`assess`, pure: what was read, ``now`` and the two bounds in, a
:class:`HealthReport` out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowFailException
from airflow.sdk import BaseOperator

from airflow_provider_eh.checkpoints.lag import PartitionLag
from airflow_provider_eh.hooks.blob import BlobStorageHook
from airflow_provider_eh.hooks.checkpoints import CheckpointHook
from airflow_provider_eh.hooks.event_hubs import EventHubHook
from airflow_provider_eh.hooks.producer_state import ProducerStateHook
from airflow_provider_eh.operators.task_errors import TaskSites, airflow_errors
from airflow_provider_eh.publishing.document import StateKey
from airflow_provider_eh.publishing.open_batches import OpenBatch, is_stale, open_batches
from airflow_provider_eh.stamps import batch_stamp

if TYPE_CHECKING:
    from airflow.sdk import Context

#: what the task did, for the error of a read that fails
ONLY_READS = "Nothing was written: the health check only reads ledgers and checkpoints."


def duration_text(seconds: float) -> str:
    """``42 s``, ``17 min``, ``3 h 05 min``, ``2 d 4 h``: an age as people read it."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    return f"{seconds // 86400} d {seconds % 86400 // 3600} h"


def _origin_text(origin: dict[str, Any] | None) -> str:
    if not origin or not origin.get("dag_id"):
        return "published outside Airflow (no task recorded)"
    text = f"published by DAG {origin['dag_id']!r} task {origin.get('task_id')!r} run {origin.get('run_id')!r}"
    if origin.get("map_index") not in (None, -1):
        text += f" map index {origin['map_index']}"
    return text + (f" try {origin['try_number']}" if origin.get("try_number") else "")


def describe_open_batch(batch: OpenBatch, now: datetime, max_age_seconds: float) -> str:
    """One open batch older than the bound, and what to do about it."""
    age = batch.age_seconds(now) or 0.0
    head = (f"producer group {batch.group!r} partition {batch.partition}: batch {batch.batch_id} "
            f"(eh.batch {batch_stamp(batch.batch_id)}) {batch.kind} for {duration_text(age)} "
            f"(bound {duration_text(max_age_seconds)}), {batch.events} events")
    if batch.kind == "pending":
        return (f"{head}; {_origin_text(batch.origin)}. Its publish crashed or stalled mid-send: clear that task "
                "instance (its retry reads back what landed and sends only the rest), or, if it still runs, find "
                "out why it stalls.")
    return (f"{head}, {batch.landed} of them landed; {_origin_text(batch.origin)}. A later publish found it in doubt "
            "and set it aside: only a retry of that same task instance sends the rest, so clear it (its events are "
            "not sent twice).")


def describe_lag(lag: PartitionLag, max_lag: int, no_checkpoints: bool, container: str) -> str:
    """One partition a consumer group lags on beyond the bound, and what to do about it."""
    checkpoint = "no checkpoint" if lag.checkpoint is None else f"checkpoint at sequence number {lag.checkpoint}"
    text = (f"consumer group {lag.consumer_group!r} partition {lag.partition_id}: {lag.lag} events behind (bound "
            f"{max_lag}): {checkpoint}, last enqueued {lag.last_enqueued}; ")
    text += (f"owned by {lag.owner_id!r} since {lag.owned_since}" if lag.owner_id
             else "no consumer owns the partition")
    if no_checkpoints:
        return (f"{text}. The group has no checkpoint at all in container {container!r}: check the consumer group's "
                "name and checkpoint_container, and that its consumers started.")
    return f"{text}. Check that the group's consumers run, keep up and checkpoint."


@dataclass(frozen=True)
class HealthReport:
    """
    What one health check found.

    :param hub: the hub checked.
    :param checked_at: when.
    :param max_batch_age_seconds: the bound on an open batch's age.
    :param max_lag: the bound on a consumer group's lag in events (``None``: no consumer group checked).
    :param ledgers: ``{producer group: partitions with a ledger}``.
    :param batches: every open batch of those ledgers.
    :param lags: every consumer group's lag on every partition.
    :param problems: one line per stale batch and per lag over the bound, saying what to do.
    """

    hub: str
    checked_at: datetime
    max_batch_age_seconds: float
    max_lag: int | None
    ledgers: dict[str, int]
    batches: tuple[OpenBatch, ...]
    lags: tuple[PartitionLag, ...]
    problems: tuple[str, ...]

    @property
    def healthy(self) -> bool:
        return not self.problems

    def summary(self) -> dict[str, Any]:
        """A JSON-safe summary (the task's XCom): per producer group its ledgers and open batches, per consumer
        group its lag per partition; names and numbers only."""
        now = self.checked_at
        return {
            "hub": self.hub,
            "checked_at": now.isoformat(),
            "healthy": self.healthy,
            "max_batch_age_seconds": self.max_batch_age_seconds,
            "max_lag": self.max_lag,
            "producer_groups": {
                group: {"ledgers": count, "open_batches": [
                    {"partition": b.partition, "kind": b.kind, "batch_id": b.batch_id, "events": b.events,
                     "age_seconds": b.age_seconds(now),
                     "stale": is_stale(b.age_seconds(now), self.max_batch_age_seconds)}
                    for b in self.batches if b.group == group]}
                for group, count in self.ledgers.items()
            },
            "consumer_groups": {
                group: {lag.partition_id: lag.lag for lag in self.lags if lag.consumer_group == group}
                for group in dict.fromkeys(lag.consumer_group for lag in self.lags)
            },
            "problems": list(self.problems),
        }


def assess(hub: str, now: datetime, *, ledgers: dict[str, int], batches: Iterable[OpenBatch],
           max_batch_age_seconds: float, lags: Iterable[PartitionLag] = (), max_lag: int | None = None,
           groups_without_checkpoints: Sequence[str] = (), checkpoint_container: str = "",
           state_store: str = "") -> HealthReport:
    """
    The health of what was read at ``now``: a producer group with no ledger on any partition (a name or
    a store that is wrong, or a group that never published), a batch open longer than
    ``max_batch_age_seconds`` and a lag over ``max_lag`` events are problems (a batch of unknown age is
    not one: its record predates the start time; a lag not known is not one either).

    :param state_store: where the ledgers were looked for, for the problem of a group with none.
    """
    batches, lags = tuple(batches), tuple(lags)
    problems = [f"producer group {group!r}: no ledger on any partition of hub {hub!r} in {state_store or 'the store'}. "
                "Check the group's name (the publish operators' default is '<dag_id>.<task_id>'), state_backend and "
                "state_container against its publish task; a group that has never published has none yet."
                for group, count in ledgers.items() if not count]
    problems += [describe_open_batch(b, now, max_batch_age_seconds) for b in batches
                 if is_stale(b.age_seconds(now), max_batch_age_seconds)]
    if max_lag is not None:
        problems += [describe_lag(lag, max_lag, lag.consumer_group in groups_without_checkpoints, checkpoint_container)
                     for lag in lags if lag.lag is not None and lag.lag > max_lag]
    return HealthReport(hub, now, max_batch_age_seconds, max_lag, ledgers, batches, lags, tuple(problems))


def _names(field: str, value: Any) -> list[str]:
    """A templated list of group names, checked: one name alone counts as a list of one, and a list rendered
    as text (``"['a', 'b']"``, a template without ``render_template_as_native_obj``) as that list."""
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise ValueError(f"{field}={value!r}: give a list of group names") from None
    names = [value] if isinstance(value, str) else list(value or [])
    if not all(isinstance(name, str) and name for name in names):
        raise ValueError(f"{field}={value!r}: give a list of group names")
    return names


def seconds_of(field: str, value: Any) -> float:
    """A bound given as a ``timedelta`` or a number of seconds (a rendered template too), checked."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    else:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = -1.0
    if isinstance(value, bool) or not seconds >= 0:
        raise ValueError(f"{field}={value!r}: give a timedelta or a number of seconds, 0 or more")
    return seconds


class EventHubHealthCheckOperator(TaskSites, BaseOperator):
    """
    Fail when a producer group has a batch open too long or a consumer group lags too far; the alert to wire.

    Each run reads, for each producer group, the ledger of each of the hub's partitions (one read per
    group and partition, on the backend the publish tasks use), and for the consumer groups their
    checkpoints (one List Blobs request per group) and each partition's last enqueued sequence number.
    A batch is *open* from the moment its publish wrote its intent until a publish of it commits:
    ``pending`` (its publish crashed, stalled, or is sending now) or ``partial`` (found in doubt by a
    later publish, set aside for its own run's retry). The task fails without retries
    (``AirflowFailException``) naming each batch open longer than ``max_batch_age`` (group, partition,
    batch id, age, the task instance that published it) and each partition a consumer group is more
    than ``max_lag`` events behind on (group, partition, lag, checkpoint, owner), with what to do; an
    ``on_failure_callback`` (a notifier) then alerts. A read that fails fails the task as the other
    operators' do (retried when a retry may help).

    Returns (XCom) ``{hub, checked_at, healthy, max_batch_age_seconds, max_lag, producer_groups:
    {group: {ledgers, open_batches: [...]}}, consumer_groups: {group: {partition: lag}}, problems: []}``.

    :param producer_groups: the producer groups whose ledgers to check (templated); the publish
        operators' default group is ``"{dag_id}.{task_id}"``.
    :param consumer_groups: the consumer groups whose lag to check (templated); needs ``max_lag`` and
        ``checkpoint_container``.
    :param max_batch_age: how long a batch may stay open: a ``timedelta`` or seconds (templated). Set it
        above the longest publish, retries included: a batch being sent is open too.
    :param max_lag: how many events a consumer group may be behind on a partition (templated).
    :param eventhub_name: the hub (templated); default: the connection's.
    :param event_hubs_conn_id: the ``azure_event_hubs`` connection (templated).
    :param state_backend: where the producer groups' ledgers are, as their publish tasks say: ``"blob"`` or
        ``"variable"`` (templated); default ``"blob"`` when ``state_container`` is given, else ``"variable"``.
    :param state_container: the blob backend's container (templated).
    :param checkpoint_container: the container the consumer groups checkpoint to (templated).
    :param wasb_conn_id: the ``wasb`` connection of both containers (templated).
    """

    template_fields: Sequence[str] = (
        "producer_groups", "consumer_groups", "max_batch_age", "max_lag", "eventhub_name", "event_hubs_conn_id",
        "state_backend", "state_container", "checkpoint_container", "wasb_conn_id",
    )
    ui_color = "#fde2d2"

    def __init__(
        self,
        *,
        producer_groups: str | Sequence[str] = (),
        consumer_groups: str | Sequence[str] = (),
        max_batch_age: timedelta | float | str = timedelta(minutes=30),
        max_lag: int | str | None = None,
        eventhub_name: str | None = None,
        event_hubs_conn_id: str = EventHubHook.default_conn_name,
        state_backend: str | None = None,
        state_container: str | None = None,
        checkpoint_container: str | None = None,
        wasb_conn_id: str = BlobStorageHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.producer_groups = producer_groups
        self.consumer_groups = consumer_groups
        self.max_batch_age = max_batch_age
        self.max_lag = max_lag
        self.eventhub_name = eventhub_name
        self.event_hubs_conn_id = event_hubs_conn_id
        self.state_backend = state_backend
        self.state_container = state_container
        self.checkpoint_container = checkpoint_container
        self.wasb_conn_id = wasb_conn_id

    @property
    def backend(self) -> str:
        return self.state_backend or ("blob" if self.state_container else "variable")

    def checked(self) -> tuple[list[str], list[str], float, int | None]:
        """The arguments after templating: producer groups, consumer groups, the age bound in seconds, the lag
        bound; a wrong one raises ``ValueError`` naming it and what to give."""
        producers = _names("producer_groups", self.producer_groups)
        consumers = _names("consumer_groups", self.consumer_groups)
        if not producers and not consumers:
            raise ValueError("producer_groups and consumer_groups are both empty: name the groups to check")
        max_age = seconds_of("max_batch_age", self.max_batch_age)
        max_lag = None
        if consumers:
            if self.max_lag is None or not self.checkpoint_container:
                raise ValueError(f"consumer_groups={consumers!r} needs max_lag (events) and checkpoint_container")
            try:
                max_lag = int(self.max_lag)
                whole = not isinstance(self.max_lag, bool) and max_lag == float(self.max_lag) and max_lag >= 0
            except (TypeError, ValueError):
                whole = False
            if not whole:
                raise ValueError(f"max_lag={self.max_lag!r}: give a whole number of events, 0 or more")
        if producers:  # the hook refuses an unknown backend, and the blob backend without its container
            ProducerStateHook(self.backend, wasb_conn_id=self.wasb_conn_id, container=self.state_container)
        return producers, consumers, max_age, max_lag

    def execute(self, context: Context) -> dict[str, Any]:
        with airflow_errors(self.task_id, self):
            report = self.check(datetime.now(UTC))
        for line in report.problems:
            self.log.error("%s", line)
        if not report.healthy:
            raise AirflowFailException(
                f"Task {self.task_id!r}: hub {report.hub!r}: {len(report.problems)} problem(s) found by the health "
                "check:\n- " + "\n- ".join(report.problems))
        self.log.info("Hub %r healthy: %s", report.hub, report.summary())
        return report.summary()

    def check(self, now: datetime) -> HealthReport:
        """Read the ledgers and checkpoints once and assess them at ``now``."""
        producers, consumers, max_age, max_lag = self.checked()
        hub_hook = EventHubHook(self.event_hubs_conn_id, self.eventhub_name)
        endpoint = hub_hook.get_endpoint()
        lags: list[PartitionLag] = []
        where = ""
        without: tuple[str, ...] = ()
        if consumers:
            assert self.checkpoint_container is not None
            hook = CheckpointHook(container=self.checkpoint_container, event_hubs_conn_id=self.event_hubs_conn_id,
                                  wasb_conn_id=self.wasb_conn_id, eventhub_name=self.eventhub_name)
            last = hook.last_enqueued()
            partitions = list(last)
            self.remember_site(hook.blob_hook.failure_site(self.checkpoint_container, container_field="checkpoint_container",
                                                           role="checkpoints", done=ONLY_READS))
            progress = hook.progress({p: -1 for p in partitions}, consumers, last)
            lags, without = list(progress.lags), progress.groups_without_checkpoints
        else:
            partitions = hub_hook.get_partition_ids()
        ledgers: dict[str, int] = {}
        batches: list[OpenBatch] = []
        if producers:
            state = ProducerStateHook(self.backend, wasb_conn_id=self.wasb_conn_id, container=self.state_container)
            store = state.get_store(create_container=False)
            self.remember_site(state.failure_site)
            for group in producers:
                states = [store.read(StateKey.of(endpoint, group, p)) for p in partitions]
                ledgers[group] = sum(state is not None for state in states)
                batches += [batch for state in states if state is not None for batch in open_batches(state)]
            where = (f"container {self.state_container!r}" if self.backend == "blob" else "Airflow Variables")
        return assess(endpoint.eventhub_name, now, ledgers=ledgers, batches=batches, max_batch_age_seconds=max_age,
                      lags=lags, max_lag=max_lag, groups_without_checkpoints=without,
                      checkpoint_container=self.checkpoint_container or "", state_store=where)
