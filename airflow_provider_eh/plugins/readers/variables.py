"""Producer states of the Airflow Variables backend, read from the metadata database without writing.

The Variables backend (:class:`~airflow_provider_eh.hooks.producer_state.ProducerStateHook` with
``backend="variable"``) keeps one Variable per (group, partition), ``eh_producer_state.{group}.{partition}``
(lower-cased), holding the same JSON document as the blob backend (namespace and hub included), and a
Variable per ledger record, ``eh_producer_state.{group}.{partition}.{batch|history}.{name}``. The view
lists the keys once, reads the candidate documents in one query and decodes them through the engine's
own :class:`~airflow_provider_eh.publishing.variable_store.VariableProducerStateStore`, whose
``Variables`` here is :class:`ReadOnlyVariables`: every write refuses.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from airflow_provider_eh.plugins.access import VARIABLE, reader

PREFIX = "eh_producer_state"
RECORD_KINDS = ("batch", "history")


def state_candidates(keys: Iterable[str], prefix: str = PREFIX) -> list[str]:
    """The keys that may hold a state document: ``{prefix}.{group}.{partition}``, not a ledger record's
    ``{prefix}.{group}.{partition}.{batch|history}.{name}`` (listed by the thousand). A group whose name's
    last dotted part is ``batch`` or ``history`` cannot be told from a record by its key and is not found."""
    found = []
    for key in keys:
        if not key.startswith(prefix + "."):
            continue
        parts = key[len(prefix) + 1:].split(".")
        if len(parts) < 2 or not all(parts) or (len(parts) >= 4 and parts[-2] in RECORD_KINDS):
            continue
        found.append(key)
    return found


@dataclass(frozen=True)
class VariableState:
    """One state document of the Variables backend: its key and the names it was written for."""

    key: str
    namespace: str
    hub: str
    group: str
    partition: str
    text: str


def parse_state(key: str, text: str | None) -> VariableState | None:
    """The document under ``key`` when it is a producer state (a JSON object naming namespace, hub, group and
    partition); ``None`` for a ledger record or anything else."""
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(f), str) for f in ("namespace", "hub", "group", "partition")):
        return None
    if f"{PREFIX}.{doc['group']}.{doc['partition']}".lower() != key:
        return None
    return VariableState(key, doc["namespace"], doc["hub"], doc["group"], doc["partition"], text)


class ReadOnlyVariables:
    """The ``Variables`` of :class:`~airflow_provider_eh.publishing.variable_store.VariableProducerStateStore`
    over the metadata database, for reading only: values already read are served from ``known``."""

    def __init__(self, known: dict[str, str] | None = None):
        self.known = dict(known or {})

    def get(self, key: str) -> str | None:
        if key in self.known:
            return self.known[key]
        values = read_values([key])
        return values.get(key)

    def set(self, key: str, value: str) -> None:
        raise PermissionError(f"the Event Hubs view never writes: refused to set Airflow Variable {key!r}")

    def delete(self, key: str) -> None:
        raise PermissionError(f"the Event Hubs view never writes: refused to delete Airflow Variable {key!r}")


def list_keys(prefix: str = PREFIX) -> list[str]:
    """Every Variable key under ``prefix.``, from the metadata database (keys only)."""
    from sqlalchemy import select

    from airflow.models.variable import Variable
    from airflow.utils.session import create_session

    pattern = prefix.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%") + ".%"
    with create_session() as session:
        return list(session.scalars(select(Variable.key).where(Variable.key.like(pattern, escape="\\"))))


def read_values(keys: list[str]) -> dict[str, str]:
    """The values of ``keys`` (decrypted), in one query; a value that cannot be decrypted raises
    :class:`UnreadableVariableError` naming its key."""
    from sqlalchemy import select

    from airflow.models.variable import Variable
    from airflow.utils.session import create_session

    from airflow_provider_eh.hooks.producer_state import variable_value

    out: dict[str, str] = {}
    if not keys:
        return out
    with create_session() as session:
        for start in range(0, len(keys), 500):
            for row in session.scalars(select(Variable).where(Variable.key.in_(keys[start:start + 500]))):
                value = variable_value(row)
                if value is not None:
                    out[row.key] = value
    return out


def variable_states(may_read: Callable[[str], bool] = lambda key: True) -> list[VariableState]:
    """Every producer state document of the Variables backend whose Variable ``may_read`` allows."""
    keys = [k for k in state_candidates(list_keys()) if may_read(k)]
    values = read_values(keys)
    return [s for s in (parse_state(k, values.get(k)) for k in keys) if s is not None]


def hub_states(namespace: str, hub: str, may_read: Callable[[str], bool] = lambda key: True,
               group: str | None = None) -> list[VariableState]:
    """The producer state documents of one hub (of ``group`` only, when given) whose Variable ``may_read`` allows."""
    prefix = None if group is None else state_key(group, "")
    allowed = may_read if prefix is None else (lambda key: key.startswith(prefix) and may_read(key))
    return [s for s in variable_states(allowed)
            if (s.namespace.lower(), s.hub.lower()) == (namespace.lower(), hub.lower())
            and (group is None or s.group.lower() == group.lower())]


def store_of(states: Iterable[VariableState]) -> Any:
    """The engine's Variables store over :class:`ReadOnlyVariables` that already holds ``states``."""
    from airflow_provider_eh.publishing.variable_store import VariableProducerStateStore

    return VariableProducerStateStore(ReadOnlyVariables({s.key: s.text for s in states}), prefix=PREFIX)


def state_key(group: str, partition: str) -> str:
    """The Variable holding ``group``'s state of ``partition`` (as the Variables backend names it)."""
    return f"{PREFIX}.{group}.{partition}".lower()


def variable_reader(manager: Any, user: Any) -> Callable[[str], bool]:
    """Whether the user may read an Airflow Variable (the Variables backend's producer states), as the auth
    manager says, with the Variable's team under ``[core] multi_team``."""
    return reader(VARIABLE, manager, user)
