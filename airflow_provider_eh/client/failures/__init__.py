"""The one map from the SDKs' raw errors to the package's: which connection, which address, which field, what happened.

The Azure SDKs report a refused proxy, a certificate nobody trusts, a name that does not resolve
and a hub that does not exist as ``EventHubError``, ``ConnectError``, ``ServiceRequestError`` or
``HttpResponseError`` with a text of their own, sometimes twice over, and without the connection
they were made for. :func:`provider_error` reads such an error, its whole chain (``__cause__``,
``__context__``, the AMQP error inside an ``EventHubError``, the socket error inside an aiohttp or
urllib3 one), and returns the package's error for it, built from a :class:`FailureSite` that says
where the failure happened:

| what the chain holds | error | retried |
| --- | --- | --- |
| the proxy answered CONNECT with 401 or 407 | ``ProxyRefusedError`` | no |
| the proxy answered CONNECT with 403 | ``ProxyRefusedError`` | no |
| the proxy answered CONNECT with another status (502, ...) | ``ConnectionUnreachableError`` | yes |
| a name that does not resolve (``socket.gaierror``; ``EAI_AGAIN``: retried) | ``ConnectionConfigError`` | no |
| a certificate that does not verify, another TLS failure | ``ConnectionConfigError`` | no |
| a missing hub, consumer group or container | ``UnknownEventHubError``, ``UnknownConsumerGroupError``, the store's | no |
| the service refused the credential (401, 403, an expired token) | ``CredentialRefusedError`` | no |
| the service is busy (ServerBusy, 429, 503) | ``ServiceBusyError`` | yes |
| refused, reset or lost connections, time-outs, 5xx, any other SDK or Azure Core error | ``ConnectionUnreachableError`` | yes |

The Schema Registry's failures (decoding typed events) go through the same rows at its site
(:meth:`FailureSite.of_registry`): a refused credential, or else a registry that did not answer, in
words that repeat what the registry answered (scrubbed).

Every message names the connection id, the service and its address (and the proxy's), the
connection field to check, and what already happened (``FailureSite.done``). No text of the
SDK's error is repeated, only its class, status and condition and the resolver's or TLS's reason,
so no secret it echoes (a SAS signature, a proxy password inside a URL) can reach a message; the
site holds no credential.

The site is passed explicitly: an endpoint carries the connection id its hook read it from, so layers
that know only the endpoint (read-back, Spark's driver, the engine) name the connection (:func:`site_of`);
an Airflow task hands the sites it learns (its hub, its containers) to its error mapping
(``operators/task_errors.py``). :func:`failure_scope` and :func:`note_site`, which found sites at a
distance, are deprecated.

The package's modules: :mod:`.sites` (where a failure happened), :mod:`.reading` (an error's chain read),
:mod:`.classify` (the map) and :mod:`.scope` (the site of an endpoint). The SDKs' error classes are read in the
SDK adapter (:mod:`airflow_provider_eh.client.sdk_internals`).

No Airflow import: the engines, Spark's driver and the triggers map with it too.
"""


from __future__ import annotations

from airflow_provider_eh.client.failures.classify import provider_error, provider_error_of_report, provider_errors, retry_can_help
from airflow_provider_eh.client.failures.reading import is_storage_error
from airflow_provider_eh.client.failures.scope import failure_scope, note_site, site_of, storage_failure
from airflow_provider_eh.client.failures.sites import (
    BLOB_STORAGE,
    EVENT_HUBS,
    NOTHING_SENT,
    SCHEMA_REGISTRY,
    SENSOR_ONLY_READS,
    UNKNOWN_CONNECTION,
    FailureSite,
    Service,
    StoreRole,
)

__all__ = [
    "BLOB_STORAGE",
    "EVENT_HUBS",
    "FailureSite",
    "NOTHING_SENT",
    "SCHEMA_REGISTRY",
    "SENSOR_ONLY_READS",
    "Service",
    "StoreRole",
    "UNKNOWN_CONNECTION",
    "failure_scope",
    "is_storage_error",
    "note_site",
    "provider_error",
    "provider_error_of_report",
    "provider_errors",
    "retry_can_help",
    "site_of",
    "storage_failure",
]
