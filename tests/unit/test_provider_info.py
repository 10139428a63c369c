"""The provider registers itself correctly with Airflow."""

from __future__ import annotations

import importlib
import json
from importlib.metadata import entry_points
from pathlib import Path

import airflow
import jsonschema
import pytest

from airflow_provider_eh.get_provider_info import get_provider_info

_AIRFLOW = Path(airflow.__file__).parent


def test_entry_point_points_at_get_provider_info() -> None:
    (ep,) = [ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("airflow_provider_eh")]
    assert ep.load() is get_provider_info


def test_provider_info_validates_against_airflows_schema() -> None:
    schema = json.loads((_AIRFLOW / "provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_connection_types_validate_against_the_provider_yaml_schema() -> None:
    """``conn-fields`` and ``ui-field-behaviour`` follow the declarative-form schema the UI reads."""
    schema = json.loads((_AIRFLOW / "provider.yaml.schema.json").read_text())
    item_schema = schema["properties"]["connection-types"]["items"]
    for conn in get_provider_info()["connection-types"]:
        jsonschema.validate(conn, item_schema)


def test_only_the_event_hubs_connection_type_is_registered_with_secrets_as_password_fields() -> None:
    """``wasb`` belongs to the Azure provider: claiming it would take over every ``wasb`` connection."""
    conns = {c["connection-type"]: c for c in get_provider_info()["connection-types"]}
    assert set(conns) == {"azure_event_hubs"}
    assert conns["azure_event_hubs"]["conn-fields"]["connection_string"]["schema"]["format"] == "password"


def _registered_modules() -> list[str]:
    info = get_provider_info()
    return [m for kind in ("hooks", "operators", "sensors", "triggers") for entry in info.get(kind, []) for m in entry["python-modules"]]


@pytest.mark.parametrize("module", _registered_modules())
def test_every_registered_module_imports(module: str) -> None:
    importlib.import_module(module)


@pytest.mark.parametrize("conn", get_provider_info()["connection-types"], ids=lambda c: c["connection-type"])
def test_every_hook_class_imports_and_declares_its_connection(conn: dict) -> None:
    module, _, name = conn["hook-class-name"].rpartition(".")
    hook = getattr(importlib.import_module(module), name)
    assert hook.conn_type == conn["connection-type"]
    assert hook.default_conn_name == f"{conn['connection-type']}_default"
    assert hook.hook_name == conn["hook-name"]


def test_the_provider_info_the_package_and_pyproject_toml_name_one_version() -> None:
    """Airflow's providers list shows ``versions[0]``: the release's, as the built distribution declares it."""
    import tomllib

    import airflow_provider_eh

    declared = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]["version"]
    assert get_provider_info()["versions"] == [airflow_provider_eh.__version__] == [declared] == ["1.1.0"]
