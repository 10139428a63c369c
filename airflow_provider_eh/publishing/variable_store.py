"""Producer state in key-value "Variables": one JSON document per (group, partition), single-writer.

The store of the Airflow Variables backend, without Airflow: it reads and writes through an object
with ``get(key) -> str | None`` and ``set(key, value)`` (:class:`Variables`), which the hook layer
(:class:`~airflow_provider_eh.hooks.producer_state.AirflowVariables`) builds on ``airflow.sdk.Variable``
and tests build on a dict. The document is the same JSON as the blob backend's, including the
namespace and hub it belongs to, under ``eh_producer_state.{group}.{partition}`` (lower-cased); each
ledger record is a Variable of its own, ``eh_producer_state.{group}.{partition}.{batch|history}.{name}``,
so no Variable grows with the ledger's age (one metadata row each, a few hundred bytes).

**Single-writer.** A Variable API has no compare-and-swap, so the claim writes a fresh token,
re-reads it, and re-checks it before every write and before every SDK batch; this catches a second
publisher that claimed in between (a paused publisher resumes, reads a token that is not its own,
and stops), but two publishers racing inside the same instant can both pass. Runs of one producer
group must be serialised (a pool with one slot for the publishing task, or ``max_active_runs=1``).
A token check that does not answer within ``hold_seconds`` stops the publisher too.
"""

from __future__ import annotations

import time
import uuid
from typing import Protocol

from airflow_provider_eh.errors import InvalidProducerStateError, UnreadableVariableError
from airflow_provider_eh.publishing.claim import StateClaim
from airflow_provider_eh.publishing.document import ProducerState, StateKey
from airflow_provider_eh.publishing.state import OperationTimer, ProducerStateStore, timed


class Variables(Protocol):
    """The calls the store makes; ``get`` raises :class:`UnreadableVariableError` for a value it cannot read."""

    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str) -> None: ...

    def delete(self, key: str) -> None:
        """Delete a key (absent: no error); only pruning deletes."""
        ...


class VariableStateClaim(StateClaim):
    """A claim of the Variables backend: its tag is the claim token, checked again before every SDK batch."""

    def __init__(self, key: StateKey, state: ProducerState, where: str, store: VariableProducerStateStore):
        super().__init__(key, state, None, where)
        self.store = store

    def check(self) -> None:
        """Read the token back: another publisher's means a takeover; then the deadline, as for every claim."""
        if not self.lost.is_set() and self.tag is not None:
            started = time.monotonic()
            try:
                current = self.store.read(self.key)
            except Exception as exc:  # an unreadable token proves nothing: stop, a retry recovers
                self.mark_lost(f"the claim token could not be read back: {type(exc).__name__}")
            else:
                if current is None or current.claim_token != self.tag:
                    self.mark_lost("another publisher wrote a new claim token")
                else:
                    self.hold(started, self.store.hold_seconds, 0.0)
        super().check()


class VariableProducerStateStore(ProducerStateStore[VariableStateClaim]):
    """
    Producer state in Variables, ``{prefix}.{group}.{partition}`` (lower-cased); single-writer (see the module).

    :param variables: where the documents live (:class:`Variables`).
    :param prefix: Variable name prefix.
    :param hold_seconds: how long a confirmed claim token counts as held: a check of the token that
        takes longer (a pause, an API that does not answer) stops the sender.
    :param on_operation: told the duration of each operation
        (:data:`~airflow_provider_eh.publishing.state.OperationTimer`); ``None``: nothing is timed.
    """

    backend = "variable"

    def __init__(self, variables: Variables, *, prefix: str = "eh_producer_state", hold_seconds: float = 15.0,
                 on_operation: OperationTimer | None = None):
        self.variables = variables
        self.prefix = prefix
        self.hold_seconds = hold_seconds
        self.on_operation = on_operation

    def variable_name(self, key: StateKey) -> str:
        return f"{self.prefix}.{key.group}.{key.partition}".lower()

    def describe(self, key: StateKey) -> str:
        return f"Airflow Variable {self.variable_name(key)!r}"

    def reset_hint(self, key: StateKey) -> str:
        return f"delete Airflow Variable {self.variable_name(key)!r} (`airflow variables delete {self.variable_name(key)}`)"

    @timed("read")
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
        return self.decode(key, text)

    def _acquire(self, key: StateKey) -> VariableStateClaim:
        state = self.read(key) or ProducerState.new(key)
        return VariableStateClaim(key, state, self.describe(key), self)

    @timed("write")
    def write(self, claim: VariableStateClaim, state: ProducerState) -> None:
        if claim.lost.is_set():
            claim.check()  # raises with the reason recorded
        # no deadline here: the token read back below is the proof, however long ago the last write was
        # (a Spark stage or a long read-back between two writes is no pause)
        name = self.variable_name(claim.key)
        if claim.tag is not None:  # not the claim's own first write: the token must still be ours
            current = self.read(claim.key)
            if current is None or current.claim_token != claim.tag:
                claim.mark_lost("another publisher wrote a new claim token")
                claim.check()
        token = state.claim_token or uuid.uuid4().hex
        state.claim_token = token
        started = time.monotonic()
        self.variables.set(name, state.to_json())
        reread = self.read(claim.key)
        if reread is None or reread.claim_token != token:
            claim.mark_lost("the claim token read back is not ours")
            claim.check()
        claim.tag = token
        claim.state = state
        claim.hold(started, self.hold_seconds, 0.0)

    def record_variable_name(self, key: StateKey, kind: str, name: str) -> str:
        """A ledger record's Variable: ``{prefix}.{group}.{partition}.{batch|history}.{name}`` (lower-cased)."""
        return f"{self.prefix}.{key.group}.{key.partition}.{kind}.{name}".lower()

    def get_record(self, key: StateKey, kind: str, name: str) -> str | None:
        name = self.record_variable_name(key, kind, name)
        try:
            return self.variables.get(name)
        except UnreadableVariableError as exc:
            raise InvalidProducerStateError(
                f"ledger record Airflow Variable {name!r} for {key}: {exc}. Restore the Fernet key."
            ) from None

    def put_record(self, claim: VariableStateClaim, kind: str, name: str, text: str) -> None:
        self.variables.set(self.record_variable_name(claim.key, kind, name), text)

    def delete_record(self, claim: VariableStateClaim, kind: str, name: str) -> None:
        self.variables.delete(self.record_variable_name(claim.key, kind, name))

    def describe_record(self, key: StateKey, kind: str, name: str) -> str:
        return f"Airflow Variable {self.record_variable_name(key, kind, name)!r}"

    @timed("release")
    def release(self, claim: VariableStateClaim) -> None:
        """Nothing to release: the token stays until the next claim replaces it."""
