"""A feature whose extra is not installed fails at once, naming the extra to install, not deep inside with an import error."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from airflow_provider_eh.client.typed_events import TypedDecoder
from airflow_provider_eh.errors import MissingExtraError
from airflow_provider_eh.extras import MODULES, require_extra


def _uninstalled(monkeypatch: pytest.MonkeyPatch, extra: str) -> None:
    """Make every module of ``extra`` fail to import, as where the extra is not installed."""
    for module in MODULES[extra]:
        monkeypatch.setitem(sys.modules, module, None)  # type: ignore[arg-type]


def test_an_installed_extra_passes() -> None:
    require_extra("schemaregistry", "typed events")  # installed wherever the unit suite runs, the floor's too


def test_a_typed_publish_without_the_extra_names_it_before_asking_any_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_eh.operators.publish import EventHubPublishOperator

    _uninstalled(monkeypatch, "schemaregistry")
    op = EventHubPublishOperator(task_id="typed", eventhub_name="orders", events=[{"body": {"a": 1}}],
                                 schema_group="orders", schema={"type": "record", "name": "O", "fields": []},
                                 event_hubs_conn_id="no_such_connection")
    with pytest.raises(MissingExtraError, match=r"schema_group='orders'.*pip install 'airflow-provider-eh\[schemaregistry\]'"):
        op.row_encoder()


def test_a_typed_event_without_the_extra_fails_the_run_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    registry: list[Any] = []
    decoder = TypedDecoder(lambda: registry.append("asked"), conn_id="eh")
    _uninstalled(monkeypatch, "schemaregistry")
    with pytest.raises(MissingExtraError, match=r"schema id 0123.*\[schemaregistry\]"):
        decoder.decode(b"\x02", "avro/binary+0123")
    assert registry == []  # the registry is not asked for what cannot be decoded here


def test_a_delta_sink_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_eh.operators.ingest_base import delta_store

    _uninstalled(monkeypatch, "deltalake")
    endpoint = type("Endpoint", (), {"namespace": "ns", "eventhub_name": "orders"})()
    with pytest.raises(MissingExtraError, match=r"table '/data/orders'.*pip install 'airflow-provider-eh\[deltalake\]'"):
        delta_store(endpoint, "$Default", "/data/orders", "wasb_default")
