"""Which Microsoft Entra credential an endpoint without a connection string builds, and with what."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_eh.client.endpoint import entra_credential


class Recorded:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


def test_default_credential_keeps_azure_client_id_unless_an_identity_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import azure.identity

    monkeypatch.setattr(azure.identity, "DefaultAzureCredential", Recorded)
    # no identity named: nothing passed, so DefaultAzureCredential reads AZURE_CLIENT_ID itself (workload identity)
    assert entra_credential("default", None, None, None, None).kwargs == {}
    assert entra_credential("default", None, None, None, "mi-1").kwargs == {"managed_identity_client_id": "mi-1"}
