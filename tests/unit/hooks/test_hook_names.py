"""The hooks are spelled as the operators are (``EventHub*``); their old names still import, with a warning."""

from __future__ import annotations

import pytest
from airflow.exceptions import AirflowProviderDeprecationWarning

from airflow_provider_eh.get_provider_info import get_provider_info
from airflow_provider_eh.hooks import event_hubs


@pytest.mark.parametrize(("old", "new"), [("EventHubsHook", "EventHubHook"), ("EventHubsAsyncHook", "EventHubAsyncHook")])
def test_the_old_hook_names_are_the_new_hooks_with_a_deprecation_warning(old: str, new: str) -> None:
    with pytest.warns(AirflowProviderDeprecationWarning, match=f"{old} is deprecated and will be removed in 2.0.0; use "
                                                               f"airflow_provider_eh.hooks.event_hubs.{new}"):
        assert getattr(event_hubs, old) is getattr(event_hubs, new)
    with pytest.raises(AttributeError, match="no attribute 'EventHubsClient'"):
        event_hubs.EventHubsClient  # noqa: B018


def test_the_connection_type_names_the_hook_by_its_new_name() -> None:
    types = {t["connection-type"]: t["hook-class-name"] for t in get_provider_info()["connection-types"]}
    assert types["azure_event_hubs"] == "airflow_provider_eh.hooks.event_hubs.EventHubHook"
