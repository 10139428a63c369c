"""Fixtures of the Spark publishing tests: a hub and container per test (the ``spark`` session is in
``tests/integration/conftest.py``), and a standalone cluster whose Python has no Airflow."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_kit import REPO, SparkSetup

from tests.support.spark_cluster import StandaloneCluster, airflow_free_python, provider_py_files, spark_class_archive


@pytest.fixture
def setup(event_hubs: Any, azurite: Any, hub: str, container: str, tmp_path: Path) -> SparkSetup:
    return SparkSetup(event_hubs, azurite, hub, container, tmp_path)


@pytest.fixture(scope="session")
def airflow_free() -> Path:
    """The interpreter of a virtual environment with PySpark and the Azure SDK and no Airflow, kept in
    ``.local/spark-airflow-free/`` across sessions (see :func:`airflow_free_python`)."""
    return airflow_free_python(REPO / ".local" / "spark-airflow-free")


@pytest.fixture(scope="session")
def provider_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The provider built from the checkout, as a zip for ``--py-files``."""
    return provider_py_files(tmp_path_factory.mktemp("provider-zip"))


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory, airflow_free: Path) -> Iterator[StandaloneCluster]:
    """A standalone master and two workers whose Python is :func:`airflow_free`, stopped after the module;
    their JVMs share a class archive (:func:`spark_class_archive`, built on first use and kept)."""
    # three applications at once (the Connect server, a stalled job and the job taking over), each with one
    # single-core executor of 512m on each worker
    with StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), python=airflow_free, cores=3, memory="2g",
                           class_archive=spark_class_archive(airflow_free)) as cluster:
        yield cluster
