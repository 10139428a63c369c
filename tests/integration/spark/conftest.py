"""Fixtures of the Spark publishing tests: a hub and container per test (the ``spark`` session is in
``tests/integration/conftest.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_kit import SparkSetup


@pytest.fixture
def setup(event_hubs: Any, azurite: Any, hub: str, container: str, tmp_path: Path) -> SparkSetup:
    return SparkSetup(event_hubs, azurite, hub, container, tmp_path)
