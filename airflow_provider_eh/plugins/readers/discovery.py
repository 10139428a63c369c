"""What the Event Hubs view finds by itself: the connections, where their state lives, and the hubs of a namespace.

Event Hubs' data plane (AMQP, a SAS key) reads the properties of one hub only; listing the hubs of a
namespace takes Azure Resource Manager, which a SAS connection string cannot call. So the hubs of a
connection's namespace are those found: the connection's own hub (``EntityPath`` or the
``eventhub_name`` field), the hubs of the producer states in the state container (Blob backend) and
in Airflow Variables, and the hubs of the checkpoint and ownership blobs in the checkpoint container
(``<namespace>/<hub>/<group>/checkpoint/<partition>``).

Where the state lives (:data:`STORE_SETTINGS`) comes from, in this order: the request, the
connection's extra fields of the same name, the provider's ``[azure_event_hubs] view_<setting>``
options; the ``wasb`` connection defaults to ``wasb_default``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

from airflow_provider_eh.client.failures import StoreRole
from airflow_provider_eh.errors import ConnectionConfigError, ViewReadError
from airflow_provider_eh.plugins.readers.reading import CONTAINER_HINT, DEFAULT_WASB_CONN_ID, Reading, Source, read_failure
from airflow_provider_eh.plugins.redaction import failure

CONN_TYPE = "azure_event_hubs"
#: the settings of a source that a connection's extras or the provider's configuration may give
STORE_SETTINGS = ("wasb_conn_id", "state_container", "checkpoint_container")
CONFIG_SECTION = "azure_event_hubs"


def _config(option: str) -> str | None:
    from airflow.configuration import conf

    return conf.get(CONFIG_SECTION, f"view_{option}", fallback="") or None


def settle(
    source: Source, extras: dict[str, Any], config: Callable[[str], str | None] = _config
) -> tuple[Source, dict[str, str]]:
    """``source`` with each of :data:`STORE_SETTINGS` it leaves unset taken from the connection's ``extras``
    or the provider's configuration, and where each came from (``request``, ``connection``, ``config``,
    ``default`` or ``none``)."""
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for name in STORE_SETTINGS:
        given = getattr(source, name)
        extra = extras.get(name) or extras.get(f"extra__{CONN_TYPE}__{name}")
        for origin, value in (("request", given), ("connection", extra), ("config", config(name))):
            if isinstance(value, str) and value.strip():
                values[name], origins[name] = value.strip(), origin
                break
        else:
            default = DEFAULT_WASB_CONN_ID if name == "wasb_conn_id" else None
            values[name], origins[name] = default, "default" if default else "none"
    return dataclasses.replace(source, **values), origins


def _conn_type_of(value: str) -> str | None:
    """The connection type of an ``AIRFLOW_CONN_*`` value (JSON or URI), ``None`` when it cannot be read."""
    value = value.strip()
    if value.startswith("{"):
        try:
            doc = json.loads(value)
        except ValueError:
            return None
        return doc.get("conn_type") if isinstance(doc, dict) else None
    scheme, sep, _ = value.partition("://")
    return scheme.replace("-", "_") if sep else None


def event_hubs_connection_ids() -> list[str]:
    """The ids of every ``azure_event_hubs`` connection in the metadata database and in ``AIRFLOW_CONN_*``
    environment variables (a secrets backend cannot be listed: its connections are named in the view)."""
    from sqlalchemy import select

    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    found = {k[len("AIRFLOW_CONN_"):].lower() for k, v in os.environ.items()
             if k.startswith("AIRFLOW_CONN_") and _conn_type_of(v) == CONN_TYPE}
    with create_session() as session:
        found |= set(session.scalars(select(Connection.conn_id).where(Connection.conn_type == CONN_TYPE)))
    return sorted(found)


def connection_summary(reading: Reading, conn_id: str) -> dict[str, Any]:
    """A connection as the view lists it: its namespace and own hub (no network call), or what is wrong with it."""
    from airflow_provider_eh.hooks.event_hubs import EventHubHook

    try:
        hook = reading.hook(EventHubHook, conn_id)
        namespace, hub = namespace_and_hub(hook)
    except (ViewReadError, ConnectionConfigError) as exc:
        return {"conn_id": conn_id, "error": str(exc)}
    return {"conn_id": conn_id, "namespace": namespace, "hub": hub}


def namespace_and_hub(hook: Any) -> tuple[str, str | None]:
    """The connection's namespace and its own hub (``None`` when it names none)."""
    try:
        endpoint = hook.get_endpoint()
    except ConnectionConfigError:
        endpoint = hook.get_endpoint("-")  # only the namespace is wanted: any hub name builds the endpoint
        return endpoint.fully_qualified_namespace, None
    return endpoint.fully_qualified_namespace, endpoint.eventhub_name


def state_hubs(names: list[str], namespace: str) -> set[str]:
    """Hubs of ``namespace`` named by producer-state blob names, ``<namespace>/<hub>/<group>/producer-state/<partition>``
    (lower-cased as the store writes them)."""
    prefix = f"{namespace}/".lower()
    return {name[len(prefix):].split("/", 1)[0] for name in names
            if name.startswith(prefix) and "/producer-state/" in name[len(prefix):]}


def checkpoint_hubs(names: list[str], namespace: str) -> set[str]:
    """Hubs of ``namespace`` named by checkpoint or ownership blob names, any SDK's spelling
    (``<namespace>/<hub>/<group>/checkpoint|ownership/<partition>``), lower-cased."""
    from airflow_provider_eh.checkpoints.blob_layout import namespace_spellings

    found = set()
    for spelled in namespace_spellings(namespace):
        prefix = f"{spelled}/".lower()
        for name in names:
            parts = name.lower()[len(prefix):].split("/") if name.lower().startswith(prefix) else []
            if len(parts) == 4 and parts[0] and parts[2] in ("checkpoint", "ownership"):
                found.add(parts[0])
    return found


def _listing(container: Any, prefixes: list[str]) -> list[str]:
    names: list[str] = []
    for prefix in prefixes:
        names += [blob.name for blob in container.list_blobs(name_starts_with=prefix)]
    return names


def _common_prefix(spelled: str) -> str:
    lowered = spelled.lower()
    return spelled[:next((i for i, (a, b) in enumerate(zip(spelled, lowered, strict=False)) if a != b), len(spelled))]


#: where hubs are found beside the connection: ``(found in, how to read their names, what to say when that fails)``
HubPlace = tuple[str, Callable[[], set[str]], Callable[[Exception], str]]


def hubs(reading: Reading, origins: dict[str, str], may_read_variable: Callable[[str], bool] | None) -> dict[str, Any]:
    """The hubs found for the reading's connection, each with where it was found, and the settings used."""
    from airflow_provider_eh.hooks.event_hubs import EventHubHook

    source = reading.source
    try:
        namespace, own = namespace_and_hub(reading.hook(EventHubHook, source.event_hubs_conn_id))
    except ConnectionConfigError as exc:
        raise ViewReadError(str(exc), 400) from None
    found: dict[str, set[str]] = {own.lower(): {"connection"}} if own else {}
    problems = []
    for where, read, failed in _hub_places(reading, namespace, may_read_variable):
        try:
            names = read()
        except Exception as exc:  # one store that cannot be read must not hide the hubs of the others
            problems.append(failed(exc))
            continue
        for name in names:
            found.setdefault(name.lower(), set()).add(where)
    return {
        "conn_id": source.event_hubs_conn_id,
        "namespace": namespace,
        "hub": own,
        "settings": {name: {"value": getattr(source, name), "from": origins[name]} for name in STORE_SETTINGS},
        "hubs": [{"name": name, "found_in": sorted(where)} for name, where in sorted(found.items())],
        "problems": problems,
    }


def _hub_places(reading: Reading, namespace: str, may_read_variable: Callable[[str], bool] | None) -> list[HubPlace]:
    """Where the hubs of ``namespace`` are looked for, beside the connection: the stores the source names, and the
    Airflow Variables when the user may read them."""
    from airflow_provider_eh.checkpoints.blob_layout import namespace_spellings
    from airflow_provider_eh.client.endpoint import canonical_namespace
    from airflow_provider_eh.plugins.readers.variables import variable_states

    source = reading.source
    canonical = canonical_namespace(namespace)
    places: list[HubPlace] = []
    if source.state_container:
        state = source.state_container
        places.append(("state container",
                       lambda: state_hubs(_listing(reading.container(state), [f"{canonical}/".lower()]), canonical),
                       _container_failure(reading, state, "state_container", "producer state", "listing producer states")))
    if may_read_variable is not None:
        places.append(("Airflow Variables",
                       lambda: {s.hub for s in variable_states(may_read_variable) if s.namespace.lower() == canonical.lower()},
                       lambda exc: failure("reading producer states in Airflow Variables", exc,
                                           "Check the API server's metadata database and Fernet key.").message))
    if source.checkpoint_container:
        checkpoints = source.checkpoint_container
        places.append(("checkpoint container",
                       lambda: checkpoint_hubs(_listing(reading.container(checkpoints),
                                                        [_common_prefix(f"{s}/") for s in namespace_spellings(namespace)]),
                                               namespace),
                       _container_failure(reading, checkpoints, "checkpoint_container", "checkpoints", "listing checkpoints")))
    return places


def _container_failure(reading: Reading, container: str, setting: str, kind: StoreRole,
                       doing: str) -> Callable[[Exception], str]:
    """What to say when listing ``container`` (the source's ``setting``, holding ``kind`` blobs) fails."""

    def failed(exc: Exception) -> str:
        if isinstance(exc, ViewReadError):
            return exc.message
        return read_failure(f"{doing} in container {container!r} (connection {reading.source.wasb_conn_id!r})",
                            exc, reading.blob_site(container, setting, kind), CONTAINER_HINT).message

    return failed
