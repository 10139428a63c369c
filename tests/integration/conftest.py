"""Fixtures of the integration tests that several folders share."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The test process's one in-process ``local[2]`` session (Spark tests, the bad-input module).

    Session-scoped because PySpark keeps its JVM gateway, and what it puts in ``os.environ``, for the
    life of the process: one session, started once, stopped at the end, is what the process has anyway.
    """
    spark_dir = str(Path(__file__).with_name("spark"))
    if spark_dir not in sys.path:
        sys.path.insert(0, spark_dir)
    from spark_kit import start_session

    session, owned = start_session()
    yield session
    if owned:
        session.stop()
