"""Producer-state stores behind Airflow connections: the Blob backend and the Airflow Variables backend.

``ProducerStateHook(backend=...)`` hands the publishing engine its store:

* ``"blob"``: :class:`~airflow_provider_eh.publishing.BlobProducerStateStore` in a container of the
  ``wasb`` connection (leases and ETag compare-and-swap: safe with concurrent publishers);
* ``"variable"``: :class:`VariableProducerStateStore`, one Airflow Variable per (group, partition).

The Variables backend is **single-writer**: Airflow 3's Variable API has no compare-and-swap, so the
claim writes a fresh token, re-reads it, and re-checks it before every write; this catches a second
publisher that claimed in between, but two publishers racing inside the same instant can both pass.
Runs of one producer group must therefore be serialised: a pool with one slot for the publishing
task, or ``max_active_runs=1`` on the DAG.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from airflow.sdk import BaseHook

from airflow_provider_eh.errors import InvalidProducerStateError
from airflow_provider_eh.publishing.state import ProducerState, ProducerStateStore, StateClaim, StateKey

log = logging.getLogger(__name__)

BACKENDS = ("blob", "variable")


class UnreadableVariableError(Exception):
    """A Variable row exists but its value cannot be read; never to be mistaken for an absent state."""


class _SdkVariables:
    """
    ``airflow.sdk.Variable`` behind the two calls the store needs.

    In a task run by a supervisor (every worker) writes go through the Task SDK. ``dag.test()`` in
    Airflow 3.3 runs tasks in-process without the supervisor channel ``Variable.set`` needs; there,
    and only there, reads and writes fall back to the metadata DB through ``airflow.models.Variable``.
    """

    description = "airflow-provider-eh producer state; see the provider README before editing"

    @staticmethod
    def _supervised() -> bool:
        import sys

        return hasattr(sys.modules.get("airflow.sdk.execution_time.task_runner"), "SUPERVISOR_COMMS")

    def get(self, key: str) -> str | None:
        if self._supervised():
            from airflow.sdk import Variable

            return Variable.get(key, default=None)
        from airflow.models.variable import Variable as DbVariable
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            row = session.scalar(select(DbVariable).where(DbVariable.key == key))
            if row is None:
                return None
            value = row.val
            if value is None and row._val is not None:
                raise UnreadableVariableError(
                    f"Airflow Variable {key!r} exists but cannot be decrypted (the Fernet key changed?)"
                )
            return value

    def set(self, key: str, value: str) -> None:
        if self._supervised():
            from airflow.sdk import Variable

            Variable.set(key, value, description=self.description)
            return
        from airflow.models.variable import Variable as DbVariable

        DbVariable.set(key, value, description=self.description)


class VariableProducerStateStore(ProducerStateStore):
    """
    Producer state in Airflow Variables, ``eh_producer_state.{group}.{partition}`` (lower-cased).

    Single-writer: runs of the same producer group must be serialised (pool of one slot or
    ``max_active_runs=1``); see the module docstring. The Variable holds the same JSON as the blob
    backend, including the namespace and hub it belongs to.

    :param variables: an object with ``get(key) -> str | None`` and ``set(key, value)``; defaults to
        ``airflow.sdk.Variable`` (task context).
    :param prefix: Variable name prefix.
    """

    def __init__(self, variables: Any = None, *, prefix: str = "eh_producer_state"):
        self.variables = variables or _SdkVariables()
        self.prefix = prefix

    def variable_name(self, key: StateKey) -> str:
        return f"{self.prefix}.{key.group}.{key.partition}".lower()

    def describe(self, key: StateKey) -> str:
        return f"Airflow Variable {self.variable_name(key)!r}"

    def reset_hint(self, key: StateKey) -> str:
        return f"delete Airflow Variable {self.variable_name(key)!r} (`airflow variables delete {self.variable_name(key)}`)"

    def read(self, key: StateKey) -> ProducerState | None:
        try:
            text = self.variables.get(self.variable_name(key))
        except UnreadableVariableError as exc:
            raise InvalidProducerStateError(
                f"producer state {self.describe(key)} for {key}: {exc}. Restore the Fernet key, or to start over "
                f"{self.reset_hint(key)}."
            ) from None
        if text is None:
            return None
        return ProducerState.from_json(text, key, self.describe(key), self.reset_hint(key))

    def _acquire(self, key: StateKey) -> StateClaim:
        state = self.read(key) or ProducerState.new(key)
        return StateClaim(key, state, None, self.describe(key))

    def write(self, claim: StateClaim, state: ProducerState) -> None:
        claim.check()
        name = self.variable_name(claim.key)
        if claim.tag is not None:  # not the claim's own first write: the token must still be ours
            current = self.read(claim.key)
            if current is None or current.claim_token != claim.tag:
                claim.mark_lost("another publisher wrote a new claim token")
                claim.check()
        token = state.claim_token or uuid.uuid4().hex
        state.claim_token = token
        self.variables.set(name, state.to_json())
        reread = self.read(claim.key)
        if reread is None or reread.claim_token != token:
            claim.mark_lost("the claim token read back is not ours")
            claim.check()
        claim.tag = token
        claim.state = state

    def release(self, claim: StateClaim) -> None:
        """Nothing to release: the token stays until the next claim replaces it."""


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

    def get_store(self) -> ProducerStateStore:
        if self.backend == "variable":
            return VariableProducerStateStore()
        from airflow_provider_eh.hooks.blob import BlobStorageHook
        from airflow_provider_eh.publishing.blob_store import BlobProducerStateStore

        assert self.container is not None
        client = BlobStorageHook(self.wasb_conn_id).ensure_container(self.container)
        return BlobProducerStateStore(client, lease_seconds=self.lease_seconds, claim_timeout=self.claim_timeout)
