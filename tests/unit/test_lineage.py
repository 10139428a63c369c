"""Dataset naming for assets and OpenLineage, and the operators' OpenLineage facets."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field

import pytest

from airflow_provider_eh.lineage import (
    eventhub_dataset,
    eventhub_uri,
    eventhubs_namespace,
    path_dataset,
    path_uri,
    table_dataset,
)


def test_event_hub_is_named_by_its_lower_cased_namespace_and_hub() -> None:
    assert eventhub_dataset("MyNs.servicebus.windows.net", "orders") == ("eventhubs://myns.servicebus.windows.net", "orders")
    assert eventhub_uri("myns.servicebus.windows.net", "orders") == "eventhubs://myns.servicebus.windows.net/orders"


def test_local_endpoint_keeps_its_port_and_a_scheme_in_the_namespace_is_dropped() -> None:
    assert eventhubs_namespace("127.0.0.1:5672") == "eventhubs://127.0.0.1:5672"
    assert eventhubs_namespace("sb://127.0.0.1:5672/") == "eventhubs://127.0.0.1:5672"


def test_empty_namespace_or_hub_is_refused() -> None:
    with pytest.raises(ValueError, match="namespace"):
        eventhubs_namespace("")
    with pytest.raises(ValueError, match="Event Hub name"):
        eventhub_dataset("ns.servicebus.windows.net", "")


def test_local_path_is_absolute_under_the_file_namespace() -> None:
    assert path_dataset("/data/orders/") == ("file", "/data/orders")
    assert path_dataset("file:///data/orders") == ("file", "/data/orders")
    assert path_uri("/data/orders") == "file:///data/orders"


def test_url_path_splits_into_authority_and_path() -> None:
    url = "abfss://lake@acct.dfs.core.windows.net/orders/ds=2026-01-01"
    assert path_dataset(url) == ("abfss://lake@acct.dfs.core.windows.net", "orders/ds=2026-01-01")
    assert path_uri(url) == url


def test_sql_table_namespace_is_connection_type_and_host() -> None:
    assert table_dataset("sqlite", "/tmp/orders.db", "order_events") == ("sqlite:///tmp/orders.db", "order_events")
    assert table_dataset("postgres", "db", "orders", port=5432, schema="sales") == ("postgres://db:5432", "sales.orders")


@pytest.fixture
def openlineage_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two OpenLineage classes the operators import, as plain dataclasses (the provider is not installed)."""

    @dataclass
    class Dataset:
        namespace: str
        name: str

    @dataclass
    class OperatorLineage:
        inputs: list = field(default_factory=list)
        outputs: list = field(default_factory=list)

    facet = types.ModuleType("airflow.providers.common.compat.openlineage.facet")
    facet.Dataset = Dataset  # type: ignore[attr-defined]
    extractors = types.ModuleType("airflow.providers.openlineage.extractors")
    extractors.OperatorLineage = OperatorLineage  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, facet.__name__, facet)
    monkeypatch.setitem(sys.modules, extractors.__name__, extractors)


def test_publish_operators_report_the_hub_as_output_and_spark_the_path_as_input(openlineage_stand_in: None) -> None:
    from airflow_provider_eh.operators.publish import EventHubPublishOperator
    from airflow_provider_eh.operators.spark_publish import SparkToEventHubOperator

    publish = EventHubPublishOperator(task_id="publish", events=[])
    publish._lineage_hub = ("NS.servicebus.windows.net", "orders")
    lineage = publish.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("eventhubs://ns.servicebus.windows.net", "orders")]
    assert lineage.inputs == []

    spark = SparkToEventHubOperator(task_id="spark", path="/data/orders/ds=2026-01-01")
    spark._lineage_hub = ("127.0.0.1:5672", "orders")
    lineage = spark.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("file", "/data/orders/ds=2026-01-01")]
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("eventhubs://127.0.0.1:5672", "orders")]


def test_ingest_operator_reports_the_hub_as_input_and_the_table_as_output(
    openlineage_stand_in: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_eh.operators.ingest import EventHubIngestOperator

    monkeypatch.setenv("AIRFLOW_CONN_ORDERS_DB", '{"conn_type": "sqlite", "host": "/tmp/orders.db"}')
    ingest = EventHubIngestOperator(task_id="ingest", table="order_events", sql_conn_id="orders_db")
    ingest._lineage_hub = ("127.0.0.1:5672", "orders")
    lineage = ingest.get_openlineage_facets_on_complete(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("eventhubs://127.0.0.1:5672", "orders")]
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("sqlite:///tmp/orders.db", "order_events")]


HAND_WRITTEN = "eventhubs://NS.ServiceBus.Windows.Net/orders"


def test_a_hand_written_eventhubs_asset_is_the_asset_the_provider_names_for_the_hub() -> None:
    """Airflow runs the registered ``eventhubs`` sanitizer: the namespace is lower-cased as lineage names it."""
    from airflow.sdk import Asset

    from airflow_provider_eh.assets import create_asset

    provider_made = create_asset(fully_qualified_namespace="ns.servicebus.windows.net", eventhub_name="orders")
    assert Asset(HAND_WRITTEN).uri == provider_made.uri == eventhub_uri("ns.servicebus.windows.net", "orders")
    assert Asset(name="orders_hub", uri=HAND_WRITTEN) == Asset(name="orders_hub", uri=provider_made.uri)
    assert Asset(provider_made.uri).uri == provider_made.uri  # sanitizing the provider's URI changes nothing
    assert Asset("eventhubs://127.0.0.1:5672/orders/").uri == eventhub_uri("127.0.0.1:5672", "orders")


@pytest.mark.parametrize("uri", ["eventhubs://ns.servicebus.windows.net", "eventhubs://ns.servicebus.windows.net/a/b", "eventhubs:///orders"])
def test_an_eventhubs_asset_uri_without_exactly_one_hub_and_a_namespace_is_refused(uri: str) -> None:
    from airflow.sdk import Asset

    with pytest.raises(ValueError, match=r"names one hub: eventhubs://<namespace>/<hub>"):
        Asset(uri)


def test_airflow_converts_an_eventhubs_asset_to_the_dataset_the_operators_report(openlineage_stand_in: None) -> None:
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk import Asset

    from airflow_provider_eh.operators.publish import EventHubPublishOperator

    convert = ProvidersManager().asset_to_openlineage_converters["eventhubs"]
    publish = EventHubPublishOperator(task_id="publish", events=[])
    publish._lineage_hub = ("NS.servicebus.windows.net", "orders")
    (reported,) = publish.get_openlineage_facets_on_complete(None).outputs
    for asset in (Asset(HAND_WRITTEN), Asset(eventhub_uri("ns.servicebus.windows.net", "orders"))):
        converted = convert(asset, None)
        assert (converted.namespace, converted.name) == (reported.namespace, reported.name)


def test_publish_and_ingest_operators_share_one_openlineage_method_and_report_no_hub_before_running(
    openlineage_stand_in: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_eh.operators.ingest import EventHubIngestOperator
    from airflow_provider_eh.operators.publish import EventHubPublishOperator
    from airflow_provider_eh.operators.spark_publish import SparkToEventHubOperator

    method = EventHubPublishOperator.get_openlineage_facets_on_complete
    assert SparkToEventHubOperator.get_openlineage_facets_on_complete is method
    assert EventHubIngestOperator.get_openlineage_facets_on_complete is method

    assert EventHubPublishOperator(task_id="publish", events=[]).get_openlineage_facets_on_complete(None).outputs == []
    monkeypatch.setenv("AIRFLOW_CONN_ORDERS_DB", '{"conn_type": "sqlite", "host": "/tmp/orders.db"}')
    ingest = EventHubIngestOperator(task_id="ingest", table="order_events", sql_conn_id="orders_db")
    lineage = ingest.get_openlineage_facets_on_complete(None)
    assert lineage.inputs == [] and [(d.namespace, d.name) for d in lineage.outputs] == [("sqlite:///tmp/orders.db", "order_events")]
