"""The provider's registration with Airflow (entry point ``apache_airflow_provider``).

Connection forms are declared as data: ``conn-fields`` (JSON-Schema, secrets as ``format: password``)
and ``ui-field-behaviour``. Only ``azure_event_hubs`` is registered: blob access reads ``wasb``
connections with the Azure provider's field names but leaves the type (its form, its hook, its
connection test) to ``apache-airflow-providers-microsoft-azure``, which owns it.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_eh import __version__

_INTEGRATION = "Azure Event Hubs"

_SECRET = {"type": ["string", "null"], "format": "password"}
_TEXT = {"type": ["string", "null"]}

_EVENT_HUBS_CONNECTION: dict[str, Any] = {
    "connection-type": "azure_event_hubs",
    "hook-class-name": "airflow_provider_eh.hooks.event_hubs.EventHubHook",
    "hook-name": "Azure Event Hubs",
    "ui-field-behaviour": {
        "hidden-fields": ["schema", "port"],
        "relabeling": {
            "host": "Fully qualified namespace",
            "login": "Client ID",
            "password": "Client secret",
        },
        "placeholders": {
            "host": "mynamespace.servicebus.windows.net (leave empty with a connection string)",
            "login": "client id of a service principal (optional; empty = DefaultAzureCredential)",
            "password": "client secret of that service principal",
        },
    },
    "conn-fields": {
        "connection_string": {
            "label": "Connection string",
            "description": (
                "Endpoint=sb://<namespace>/;SharedAccessKeyName=...;SharedAccessKey=...[;EntityPath=<hub>]. "
                "For the local endpoint add ;UseDevelopmentEmulator=true. Takes precedence over every other field."
            ),
            "schema": _SECRET,
        },
        "eventhub_name": {
            "label": "Event Hub name",
            "description": "Default hub for operators and sensors that do not name one.",
            "schema": _TEXT,
        },
        "tenant_id": {
            "label": "Tenant ID",
            "description": "Microsoft Entra tenant of the service principal (with Client ID and Client secret).",
            "schema": _TEXT,
        },
        "managed_identity_client_id": {
            "label": "Managed identity client ID",
            "description": "User-assigned identity for DefaultAzureCredential (optional).",
            "schema": _TEXT,
        },
        "transport": {
            "label": "Transport",
            "description": (
                "amqp: AMQP over TCP, port 5671 (default). websocket: AMQP over WebSockets, port 443, for networks "
                "that only let HTTPS out. A proxy always uses websocket."
            ),
            "schema": {"type": ["string", "null"], "enum": ["amqp", "websocket", None]},
        },
        "proxy_host": {
            "label": "HTTP proxy host",
            "description": "An HTTP proxy to reach the namespace through (with the proxy port); implies websocket.",
            "schema": _TEXT,
        },
        "proxy_port": {
            "label": "HTTP proxy port",
            "description": "The HTTP proxy's port.",
            "schema": {"type": ["integer", "string", "null"]},
        },
        "proxy_username": {
            "label": "HTTP proxy user",
            "description": "For a proxy that asks for Basic authentication (optional).",
            "schema": _TEXT,
        },
        "proxy_password": {
            "label": "HTTP proxy password",
            "description": "The proxy user's password.",
            "schema": _SECRET,
        },
        "custom_endpoint_address": {
            "label": "Custom endpoint address",
            "description": (
                "sb://<host>[:<port>]: connect here instead of the namespace's own name, e.g. a Private Link or "
                "application gateway address. Tokens are still issued for the namespace."
            ),
            "schema": _TEXT,
        },
        "schema_registry_namespace": {
            "label": "Schema Registry namespace",
            "description": (
                "Where the namespace's Schema Registry is, if not at the namespace's own name: the local endpoint's "
                "<host>:<registry port> (with the CA bundle of its certificate). Empty: the namespace."
            ),
            "schema": _TEXT,
        },
        "wasb_conn_id": {
            "label": "Blob connection (view)",
            "description": (
                "The wasb connection of this namespace's producer state and checkpoints, for the Event Hubs view. "
                "Empty: [azure_event_hubs] view_wasb_conn_id, else wasb_default."
            ),
            "schema": _TEXT,
        },
        "state_container": {
            "label": "State container (view)",
            "description": "The container of the producer state (Blob backend), for the Event Hubs view.",
            "schema": _TEXT,
        },
        "checkpoint_container": {
            "label": "Checkpoint container (view)",
            "description": "The container of the consumer groups' checkpoints, for the Event Hubs view.",
            "schema": _TEXT,
        },
        "ca_bundle": {
            "label": "CA bundle",
            "description": (
                "Path of a PEM file of CA certificates to trust, for a gateway with a private certificate. It must "
                "exist on every worker, the triggerer and Spark executors. Empty: the system's CAs."
            ),
            "schema": _TEXT,
        },
    },
}

_MODULES: dict[str, list[str]] = {
    "hooks": [
        "airflow_provider_eh.hooks.event_hubs",
        "airflow_provider_eh.hooks.blob",
        "airflow_provider_eh.hooks.checkpoints",
        "airflow_provider_eh.hooks.producer_state",
        "airflow_provider_eh.hooks.schema_registry",
    ],
    "operators": [
        "airflow_provider_eh.operators.ingest",
        "airflow_provider_eh.operators.publish",
        "airflow_provider_eh.operators.spark_publish",
        "airflow_provider_eh.operators.ingest_events",
        "airflow_provider_eh.operators.health_check",
        "airflow_provider_eh.operators.delta_maintenance",
    ],
    "sensors": ["airflow_provider_eh.sensors.checkpoint", "airflow_provider_eh.sensors.await_event"],
    "triggers": ["airflow_provider_eh.triggers.checkpoint", "airflow_provider_eh.triggers.event"],
}


# Options of the provider's own section; Airflow lists them (``airflow config list``) with their defaults.
_CONFIG: dict[str, Any] = {
    "azure_event_hubs": {
        "description": "The Event Hubs view in the Airflow UI (plugin ``azure_event_hubs_view``): on or off, where it reads.",
        "options": {
            "view_enabled": {
                "description": (
                    "Mount the Event Hubs view in the API server (``/eventhubs`` under ``[api] base_url``) and list "
                    "it under Browse in the UI. False: the plugin adds no route and no menu entry. Read when the "
                    "API server starts."
                ),
                "version_added": None,
                "type": "boolean",
                "example": "False",
                "default": "True",
            },
            "view_wasb_conn_id": {
                "description": (
                    "The wasb connection the Event Hubs view reads producer state and checkpoints through, for "
                    "Event Hubs connections whose 'wasb_conn_id' field is empty."
                ),
                "version_added": None,
                "type": "string",
                "example": "wasb_state",
                "default": "wasb_default",
            },
            "view_state_container": {
                "description": (
                    "The container of the producer state (Blob backend) the Event Hubs view reads, for Event Hubs "
                    "connections whose 'state_container' field is empty. Empty: only Airflow Variables are read."
                ),
                "version_added": None,
                "type": "string",
                "example": "eh-state",
                "default": "",
            },
            "view_checkpoint_container": {
                "description": (
                    "The container of the consumer groups' checkpoints the Event Hubs view reads, for Event Hubs "
                    "connections whose 'checkpoint_container' field is empty. Empty: no consumer group is shown."
                ),
                "version_added": None,
                "type": "string",
                "example": "eh-checkpoints",
                "default": "",
            },
            "lag_sampling": {
                "description": (
                    "Sample the lag of every hub opened in the Event Hubs view, for ``lag_sample_retention_hours`` "
                    "after it was last opened, into one small blob per ``lag_sample_interval`` (the view's lag "
                    "trend, and the ``eventhubs.checkpoint.lag`` metric). The API server then writes to the hub's "
                    "checkpoint container (or ``lag_samples_container``) through the view's blob connection. "
                    "False: the view writes nothing and its lag trend shows only samples already kept."
                ),
                "version_added": None,
                "type": "boolean",
                "example": "True",
                "default": "False",
            },
            "lag_sample_interval": {
                "description": "Seconds between two lag samples of a hub (at least 10): one blob each.",
                "version_added": None,
                "type": "float",
                "example": "300",
                "default": "60",
            },
            "lag_sample_retention_hours": {
                "description": (
                    "Hours a lag sample is kept (at least 1); whoever writes a sample deletes the older ones, so a "
                    "hub keeps at most retention / interval + 1 sample blobs."
                ),
                "version_added": None,
                "type": "float",
                "example": "48",
                "default": "25",
            },
            "view_history_read_seconds": {
                "description": (
                    "Seconds an answer of the view's trends spends reading the ledgers, counted from its start "
                    "(the producer states' downloads included; at least 0.1): after them it starts no other ledger's "
                    "history reads, answers with what it has added up (``complete``: false) and the next answer goes "
                    "on. The sampler, when on, reads for 10 seconds at a time in the background."
                ),
                "version_added": None,
                "type": "float",
                "example": "3",
                "default": "1",
            },
            "lag_samples_container": {
                "description": (
                    "The container, reached through the view's blob connection, that keeps the lag samples (under "
                    "``_samples/``). Empty: the hub's checkpoint container."
                ),
                "version_added": None,
                "type": "string",
                "example": "eventhubs-view",
                "default": "",
            },
        },
    },
}


def connection_type(name: str) -> dict[str, Any]:
    """The declared connection type ``name`` (hooks derive their UI behaviour from it)."""
    if name == _EVENT_HUBS_CONNECTION["connection-type"]:
        return _EVENT_HUBS_CONNECTION
    raise KeyError(name)


def get_provider_info() -> dict[str, Any]:
    """Provider metadata read by Airflow's ProvidersManager."""
    info: dict[str, Any] = {
        "package-name": "airflow-provider-eh",
        "name": "Azure Event Hubs (exactly-once)",
        "description": "Exactly-once publishing to and ingestion from Azure Event Hubs, with Spark and deferrable sensors.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": "https://learn.microsoft.com/azure/event-hubs/",
                "tags": ["azure"],
            }
        ],
        "connection-types": [_EVENT_HUBS_CONNECTION],
        "asset-uris": [
            {
                "schemes": ["eventhubs"],
                "handler": "airflow_provider_eh.assets.sanitize_uri",
                "factory": "airflow_provider_eh.assets.create_asset",
                "to_openlineage_converter": "airflow_provider_eh.assets.convert_asset_to_openlineage",
            }
        ],
    }
    info["config"] = _CONFIG
    # the common messaging provider's queue schemes: MessageQueueTrigger(queue="eventhubs://<namespace>/<hub>")
    info["queues"] = ["airflow_provider_eh.queues.EventHubsMessageQueueProvider"]
    for kind, modules in _MODULES.items():
        if modules:
            info[kind] = [{"integration-name": _INTEGRATION, "python-modules": list(modules)}]
    return info
