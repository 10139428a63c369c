"""The provider's Airflow plugin: the Event Hubs view, on unless ``[azure_event_hubs] view_enabled`` is false.

Registered through the package's ``airflow.plugins`` entry point (``pyproject.toml``), not the
provider info's ``plugins`` list: Airflow reads that list only with ``[core] lazy_discover_providers``
off. Airflow's API server mounts the FastAPI app at :data:`URL_PREFIX` under ``[api] base_url``'s
path, and the UI lists the page in its navigation (Browse menu) and shows an Event Hubs tab on every
task instance page (:mod:`~airflow_provider_eh.plugins.tabs`). Switch it off with::

    [azure_event_hubs]
    view_enabled = False

or ``AIRFLOW__AZURE_EVENT_HUBS__VIEW_ENABLED=False``; the plugin then contributes no route, no menu
entry and no tab. The option is declared in the provider's configuration (``airflow config list`` shows it).
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_eh.plugins.urls import URL_PREFIX, base_path

CONFIG_SECTION = "azure_event_hubs"
CONFIG_OPTION = "view_enabled"


def view_enabled() -> bool:
    """Whether ``[azure_event_hubs] view_enabled`` leaves the view on (the default)."""
    from airflow.configuration import conf

    return conf.getboolean(CONFIG_SECTION, CONFIG_OPTION, fallback=True)


def _fastapi_apps() -> list[dict[str, Any]]:
    if not view_enabled():
        return []
    from airflow_provider_eh.plugins.app import create_app

    return [{"name": "Event Hubs view", "app": create_app(), "url_prefix": URL_PREFIX}]


#: the task-instance tab's query: Airflow's UI fills the placeholders in (raw in 3.1, URL-encoded later)
TAB_QUERY = "dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}&map_index={MAP_INDEX}"


def _external_views() -> list[dict[str, Any]]:
    if not view_enabled():
        return []
    view = f"{base_path()}{URL_PREFIX.strip('/')}/"
    return [{
        "name": "Event Hubs",
        "href": view,
        "url_route": "eventhubs",
        "destination": "nav",
        "category": "browse",
    }, {
        "name": "Event Hubs",
        "href": f"{view}tab?{TAB_QUERY}",
        "url_route": "eventhubs-tab",
        "destination": "task_instance",
    }]


class EventHubsViewPlugin(AirflowPlugin):
    """Producer ledgers, consumer lag and dead letters of an Event Hub, behind Airflow's authentication."""

    name = "azure_event_hubs_view"
    fastapi_apps: list[dict[str, Any]] = []
    external_views: list[dict[str, Any]] = []

    @classmethod
    def on_load(cls, *args: Any, **kwargs: Any) -> None:
        """Airflow calls this once when it registers the plugin: the settings are read then."""
        cls.fastapi_apps = _fastapi_apps()
        cls.external_views = _external_views()
