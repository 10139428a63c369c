"""The ``eventhubs`` data source's options: read case-insensitively into the engine's records, every bad one
named with what to give, secrets kept out of ``repr``; the identity's batch id stable and apart from the
operator's."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from airflow_provider_eh.errors import DataSourceOptionError
from airflow_provider_eh.publishing import derive_batch_id
from airflow_provider_eh.spark.datasource.options import WriteOptions, identity_batch_id, stream_identity

HUB_CS = "Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=s3cret-hub;EntityPath=orders"
BLOB_CS = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=s3cret-blob;EndpointSuffix=core.windows.net"
BASE = {"connectionString": HUB_CS, "stateConnectionString": BLOB_CS, "stateContainer": "state",
        "producerGroup": "orders.daily", "batchId": "2026-05-01/2026-05-02", "keyColumn": "customer"}


def read(**changes: Any) -> WriteOptions:
    options = {k: v for k, v in {**BASE, **changes}.items() if v is not None}
    return WriteOptions.from_options(options)


def test_options_become_the_engines_records_whatever_their_case() -> None:
    options = WriteOptions.from_options({k.lower(): v for k, v in {
        **BASE, "orderBy": "id, ts", "propertyColumns": '["region", "a,b"]', "hubFencing": "required",
        "leaseOnlyBatchBytes": "65536", "sendTimeout": "12.5", "claimTimeout": "0", "generation": "2",
        "transport": "websocket", "customEndpointAddress": "sb://gw.example.com:443"}.items()})
    assert options.endpoint.eventhub_name == "orders" and options.endpoint.namespace == "myns.servicebus.windows.net"
    assert options.endpoint.network.transport == "websocket"
    assert options.endpoint.network.custom_endpoint_address == "sb://gw.example.com:443"
    assert options.mapping.key_column == "customer" and options.mapping.order_by == ("id", "ts")
    assert options.mapping.property_columns == ("region", "a,b")
    assert (options.hub_fencing, options.lease_only_batch_bytes, options.send_timeout) == ("required", 65536, 12.5)
    assert (options.claim_timeout, options.generation, options.schema) == (0, 2, None)
    assert options.batch_id() == identity_batch_id("orders.daily", "2026-05-01/2026-05-02", 2)
    assert pickle.loads(pickle.dumps(options)) == options  # what executors get


def test_secrets_stay_out_of_repr() -> None:
    text = repr(read(clientSecret="s3cret-sp", stateAccountKey="s3cret-key", proxyHost="proxy", proxyPort="3128",
                      proxyUsername="u", proxyPassword="s3cret-proxy"))
    assert "s3cret" not in text


def test_entra_credentials_without_a_connection_string() -> None:
    options = read(connectionString=None, fullyQualifiedNamespace="sb://myns.servicebus.windows.net/",
                   eventHubName="orders", tenantId="t", clientId="c", clientSecret="s",
                   stateConnectionString=None, stateAccountUrl="https://acct.blob.core.windows.net")
    assert options.endpoint.credential_kind == "client_secret"
    assert options.endpoint.fully_qualified_namespace == "myns.servicebus.windows.net"
    assert (options.blob.account_url, options.blob.client_id) == ("https://acct.blob.core.windows.net", "c")
    managed = read(connectionString=None, fullyQualifiedNamespace="myns.servicebus.windows.net", eventHubName="orders",
                   managedIdentityClientId="mi-1")
    assert (managed.endpoint.credential_kind, managed.endpoint.managed_identity_client_id) == (
        "default_azure_credential", "mi-1")


@pytest.mark.parametrize(("changes", "message"), [
    ({"producerGroup": None}, "option 'producerGroup' is missing"),
    ({"batchId": " "}, "option 'batchId' is missing: what makes this write one batch"),
    ({"stateContainer": None}, "option 'stateContainer' is missing"),
    ({"stateAccountUrl": "https://acct.blob.core.windows.net"}, "give exactly one of option 'stateConnectionString'"),
    ({"stateConnectionString": None}, "give exactly one of option 'stateConnectionString'"),
    ({"connectionString": None}, "no hub to publish to: give option 'connectionString'"),
    ({"connectionString": "Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName=a;SharedAccessKey=b"},
     "option 'connectionString': no Event Hub name"),
    ({"keyColumn": None}, "give option 'partitionColumn'"),
    ({"partitionColumn": "p"}, "give option 'partitionColumn' or option 'keyColumn', not both"),
    ({"hubFencing": "maybe"}, "option 'hubFencing' is 'maybe': give 'auto', 'required' or 'false'"),
    ({"leaseOnlyBatchBytes": "2000000"}, "option 'leaseOnlyBatchBytes' is 2000000: must be a whole number of bytes"),
    ({"leaseSeconds": "90"}, "option 'leaseSeconds' is 90: give 15 to 60"),
    ({"generation": "-1"}, "option 'generation' is '-1': give 0 or more"),
    ({"sendTimeout": "soon"}, "option 'sendTimeout' is 'soon': give a number"),
    ({"commitProcesses": "0"}, "option 'commitProcesses' is '0': give 1 or more"),
    ({"commitProcesses": "two"}, "option 'commitProcesses' is 'two': give a whole number"),
    ({"transport": "carrier-pigeon"}, "option 'transport' is 'carrier-pigeon'"),
    ({"proxyUsername": "u"}, "options 'proxyUsername'/'proxyPassword' are set but 'proxyHost' is empty"),
    ({"serializer": "no_such_module:dumps"}, "option 'serializer' is 'no_such_module:dumps': ModuleNotFoundError"),
    ({"schema": '{"type": "string"}'}, "option 'schema' is set but 'schemaGroup' is not"),
    ({"schemaGroup": "orders"}, "option 'schemaGroup' is 'orders': give the schema too"),
    ({"schemaGroup": "orders", "schemaName": "x", "schemaFormat": "xml"}, "option 'schemaFormat'"),
])
def test_a_bad_option_is_named_with_what_to_give(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(DataSourceOptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read(**changes)


def test_a_stream_is_identified_by_its_checkpoint_and_each_micro_batch_by_its_id() -> None:
    base = {k: v for k, v in BASE.items() if k != "batchId"}
    with pytest.raises(DataSourceOptionError, match="a streaming write needs option 'checkpointLocation'"):
        WriteOptions.from_options(base, streaming=True)
    stream = WriteOptions.from_options({**base, "checkpointLocation": "abfss://c@a/ckpt"}, streaming=True)
    assert stream.batch_id(7) == identity_batch_id("orders.daily", stream_identity("abfss://c@a/ckpt", 7))
    assert stream.batch_id(7) != stream.batch_id(8)
    named = WriteOptions.from_options({**base, "checkpointLocation": "/x", "streamId": "orders-stream"}, streaming=True)
    assert named.identity == "orders-stream"


def test_identity_batch_ids_are_stable_and_never_an_operators() -> None:
    assert identity_batch_id("g", "2026-05-01/2026-05-02") == identity_batch_id("g", "2026-05-01/2026-05-02", 0)
    assert identity_batch_id("g", "a") != identity_batch_id("g", "a", 1) != identity_batch_id("h", "a")
    assert identity_batch_id("g", "a") != derive_batch_id("g", "d", "t", run_id="a")
