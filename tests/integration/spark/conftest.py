"""Fixtures of the Spark publishing tests: one ``local[2]`` session for all of them, a hub and container per test."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_kit import TEST_CONF, SparkSetup

from airflow_provider_eh.spark.session import SparkSettings, get_session



@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2]`` session shared by the Spark tests (jobs that write outputs, in-process publishes)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    logging.getLogger("py4j").setLevel(logging.WARNING)  # it logs from __del__ after pytest closed its streams
    session, owned = get_session(SparkSettings(master="local[2]", conf=TEST_CONF))
    session.sparkContext.setLogLevel("ERROR")
    yield session
    if owned:
        session.stop()


@pytest.fixture
def setup(event_hubs: Any, azurite: Any, hub: str, container: str, tmp_path: Path) -> SparkSetup:
    return SparkSetup(event_hubs, azurite, hub, container, tmp_path)
