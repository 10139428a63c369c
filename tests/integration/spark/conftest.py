"""Fixtures of the Spark publishing tests: one ``local[2]`` session for all of them, a hub and container per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_kit import SparkSetup, start_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2]`` session shared by the Spark tests (jobs that write outputs, in-process publishes)."""
    session, owned = start_session()
    yield session
    if owned:
        session.stop()


@pytest.fixture
def setup(event_hubs: Any, azurite: Any, hub: str, container: str, tmp_path: Path) -> SparkSetup:
    return SparkSetup(event_hubs, azurite, hub, container, tmp_path)
