"""pytest fixtures: a local Event Hubs endpoint for the session, a hub per test, and Azurite.

Installed with the package (a ``pytest11`` entry point), so a test only names them:

- ``eventhubs_endpoint``: the endpoint as a child process of the test session, on free ports, its
  data in the session's temporary folder (an :class:`~eventhubs_local.EmulatorProcess`);
- ``eventhubs_hub``: a hub of its own for each test (4 partitions), its name;
- ``eventhubs_connection_string``: the connection string of that hub (``EntityPath`` set), for the
  SDK's ``from_connection_string`` or an Airflow connection's ``connection_string``;
- ``azurite_blob``: Azurite's blob service for the session (an :class:`~eventhubs_local.azurite.AzuriteProcess`,
  ``.connection_string``), where ``azurite-blob`` is installed; the test is skipped, saying how to
  install it, where it is not.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from eventhubs_local import EmulatorProcess
from eventhubs_local.azurite import AzuriteProcess, azurite_binary


@pytest.fixture(scope="session")
def eventhubs_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    """The endpoint for the whole session, stopped at its end."""
    with EmulatorProcess(tmp_path_factory.mktemp("eventhubs-local")) as endpoint:
        yield endpoint


@pytest.fixture
def eventhubs_hub(eventhubs_endpoint: EmulatorProcess) -> str:
    """A new hub of 4 partitions on the session's endpoint."""
    name = f"hub-{uuid.uuid4().hex[:10]}"
    eventhubs_endpoint.admin.create_hub(name, partitions=4)
    return name


@pytest.fixture
def eventhubs_connection_string(eventhubs_endpoint: EmulatorProcess, eventhubs_hub: str) -> str:
    """The connection string of the test's hub."""
    return eventhubs_endpoint.connection_string(eventhubs_hub)


@pytest.fixture(scope="session")
def azurite_blob(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzuriteProcess]:
    """Azurite's blob service for the whole session; the test is skipped where Azurite is not installed."""
    try:
        azurite_binary()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    with AzuriteProcess(tmp_path_factory.mktemp("azurite")) as azurite:
        yield azurite
