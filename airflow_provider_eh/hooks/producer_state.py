"""Producer-state stores behind Airflow: the Blob backend and the Airflow Variables backend.

``ProducerStateHook(backend=...)`` hands the publishing engine its store; both stores are the
engine's (:mod:`airflow_provider_eh.publishing`), this module only connects them to Airflow:

* ``"blob"``: :class:`~airflow_provider_eh.publishing.blob_store.BlobProducerStateStore` in a container
  of the ``wasb`` connection (leases and ETag compare-and-swap: safe with concurrent publishers);
* ``"variable"``: :class:`~airflow_provider_eh.publishing.variable_store.VariableProducerStateStore` over
  :class:`AirflowVariables`, one Airflow Variable per (group, partition). It is **single-writer**:
  Airflow 3's Variable API has no compare-and-swap, so runs of one producer group must be serialised
  (a pool with one slot for the publishing task, or ``max_active_runs=1`` on the DAG).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from airflow.sdk import BaseHook

from airflow_provider_eh import metrics
from airflow_provider_eh.client.failures import FailureSite
from airflow_provider_eh.errors import ProducerStateStoreError, UnreadableVariableError
from airflow_provider_eh.publishing.blob_store import BlobProducerStateStore
from airflow_provider_eh.publishing.document import StateKey
from airflow_provider_eh.publishing.publisher import IdempotentPublisher
from airflow_provider_eh.publishing.state import OperationTimer, ProducerStateStore
from airflow_provider_eh.publishing.variable_store import VariableProducerStateStore

log = logging.getLogger(__name__)
T = TypeVar("T")

BACKENDS = ("blob", "variable")


#: one Variables call at a time in this process (see :class:`AirflowVariables`)
_CALLS = threading.Lock()


def _one_at_a_time(call: Callable[..., T]) -> Callable[..., T]:
    @functools.wraps(call)
    def serialised(*args: Any, **kwargs: Any) -> T:
        with _CALLS:
            return call(*args, **kwargs)

    return serialised


def variable_value(row: Any) -> str | None:
    """The value of a row of Airflow's Variable model, decrypted; :class:`UnreadableVariableError` when it is
    stored but cannot be decrypted (never to be mistaken for an absent value)."""
    value = row.val
    if value is None and row._val is not None:
        raise UnreadableVariableError(
            f"Airflow Variable {row.key!r} exists but cannot be decrypted (the Fernet key changed?)"
        )
    return value


class AirflowVariables:
    """
    ``airflow.sdk.Variable`` behind the calls the Variables store makes
    (:class:`~airflow_provider_eh.publishing.variable_store.Variables`).

    In a task run by a supervisor (every worker) writes go through the Task SDK. ``dag.test()`` in
    Airflow 3.3 runs tasks in-process without the supervisor channel ``Variable.set`` needs; there,
    and only there, reads and writes fall back to the metadata DB through ``airflow.models.Variable``.

    The calls are made one at a time per process: a publish checks its partitions' claim tokens from
    a thread per partition, and the in-process channel of ``dag.test()`` (a queue of answers shared by
    every thread, the channel swapped out while a request is handled) hands one thread's answer to
    another: a partition then reads another partition's token and stops, "another publisher wrote a
    new claim token", with no other publisher anywhere.
    """

    description = "airflow-provider-eh producer state; see the provider README before editing"

    @staticmethod
    def _supervised() -> bool:
        import sys

        return hasattr(sys.modules.get("airflow.sdk.execution_time.task_runner"), "SUPERVISOR_COMMS")

    @_one_at_a_time
    def get(self, key: str) -> str | None:
        if self._supervised():
            from airflow.sdk import Variable

            return Variable.get(key, default=None)
        from sqlalchemy import select

        from airflow.models.variable import Variable as DbVariable
        from airflow.utils.session import create_session

        with create_session() as session:
            row = session.scalar(select(DbVariable).where(DbVariable.key == key))
            return None if row is None else variable_value(row)

    @_one_at_a_time
    def set(self, key: str, value: str) -> None:
        if self._supervised():
            from airflow.sdk import Variable

            Variable.set(key, value, description=self.description)
            return
        from airflow.models.variable import Variable as DbVariable

        DbVariable.set(key, value, description=self.description)

    @_one_at_a_time
    def delete(self, key: str) -> None:
        if self._supervised():
            from airflow.sdk import Variable

            delete = getattr(Variable, "delete", None)
            if delete is None:
                raise ProducerStateStoreError(
                    f"pruning the ledger could not delete Airflow Variable {key!r}: this Airflow's Task SDK has no "
                    "Variable.delete. Nothing committed was lost; upgrade Airflow, or leave keep_committed and "
                    "keep_committed_days unset on this backend."
                )
            delete(key)
            return
        from airflow.models.variable import Variable as DbVariable

        DbVariable.delete(key)


def ledger_timer(backend: str) -> OperationTimer:
    """What a state store of ``backend`` tells each operation's duration: ``eventhubs.ledger.duration``."""

    def timed(operation: str, key: StateKey, seconds: float) -> None:
        metrics.timing("eventhubs.ledger.duration", seconds, hub=key.hub, producer_group=key.group,
                       partition=key.partition, operation=operation, backend=backend)

    return timed


class ProducerStateHook(BaseHook):
    """
    The producer-state store of a publishing task.

    :param backend: ``"blob"`` or ``"variable"``.
    :param wasb_conn_id: the ``wasb`` connection of the blob backend.
    :param container: the blob backend's container (created when missing).
    :param lease_seconds: the blob backend's lease duration.
    :param claim_timeout: seconds the blob backend waits for another holder's lease (``None``: a little
        longer than ``lease_seconds``, so a crashed holder's lease expires first).
    """

    def __init__(self, backend: str = "blob", *, wasb_conn_id: str = "wasb_default", container: str | None = None,
                 lease_seconds: int = 15, claim_timeout: float | None = None):
        super().__init__()
        if backend not in BACKENDS:
            raise ValueError(f"state_backend {backend!r}: choose one of {', '.join(BACKENDS)}")
        if backend == "blob" and not container:
            raise ValueError("state_backend 'blob' needs state_container (the container holding producer states)")
        self.backend = backend
        self.wasb_conn_id = wasb_conn_id
        self.container = container
        self.lease_seconds = lease_seconds
        self.claim_timeout = claim_timeout
        #: where the blob store's failures happen, once :meth:`get_store` made it (for the task's error mapping)
        self.failure_site: FailureSite | None = None

    def get_store(self, *, create_container: bool = True) -> ProducerStateStore:
        """The store of the backend; each of its operations is timed as ``eventhubs.ledger.duration``.

        :param create_container: create the blob backend's container when missing (a reader that only reads
            passes ``False``: it finds no state there instead).
        """
        timer = ledger_timer(self.backend)
        if self.backend == "variable":
            return VariableProducerStateStore(AirflowVariables(), on_operation=timer)
        from airflow_provider_eh.hooks.blob import BlobStorageHook

        assert self.container is not None
        hook = BlobStorageHook(self.wasb_conn_id)
        client = hook.ensure_container(self.container) if create_container else hook.get_container_client(self.container)
        # a storage error the engine does not map itself is mapped naming this connection and container, by the
        # task that hands this site to its error mapping
        self.failure_site = hook.failure_site(self.container, container_field="state_container", role="producer state")
        return BlobProducerStateStore(client, lease_seconds=self.lease_seconds, claim_timeout=self.claim_timeout,
                                      on_operation=timer)


def published_batch(producer_group: str, identity: str, *, generation: int = 0, eventhub_name: str | None = None,
                    state_container: str, event_hubs_conn_id: str = "azure_event_hubs_default",
                    wasb_conn_id: str = "wasb_default") -> dict[str, dict[str, Any]]:
    """
    What a Spark job writing with the ``eventhubs`` data source committed for ``identity`` (its ``batchId``), read
    from the producer-state ledger: per partition ``{events, first_seq, last_seq, service_last_sequence_number, ...}``,
    what :class:`~airflow_provider_eh.sensors.checkpoint.EventHubCheckpointSensor` takes as ``targets``.

    :param producer_group: the job's ``producerGroup``.
    :param identity: the job's ``batchId`` (the interval it published).
    :param generation: the job's ``generation``.
    :param eventhub_name: the hub; default: the Event Hubs connection's.
    :param state_container: the job's ``stateContainer``, read through ``wasb_conn_id``.
    :param event_hubs_conn_id: the ``azure_event_hubs`` connection of the hub.
    :param wasb_conn_id: the ``wasb`` connection of the state container's account.
    """
    from airflow_provider_eh.hooks.event_hubs import EventHubHook
    from airflow_provider_eh.spark.datasource.options import identity_batch_id

    endpoint = EventHubHook(event_hubs_conn_id).get_endpoint(eventhub_name)
    store = ProducerStateHook("blob", wasb_conn_id=wasb_conn_id, container=state_container).get_store(
        create_container=False)
    publisher = IdempotentPublisher(endpoint, store, producer_group=producer_group)
    batch_id = identity_batch_id(producer_group, identity, int(generation))
    return {pid: result.to_dict() for pid, result in sorted(publisher.committed_results(batch_id).items())}
