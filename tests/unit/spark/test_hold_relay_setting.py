"""A bad ``hold_relay`` address fails when the job is made, before anything is claimed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_provider_eh.spark.job import SparkPublishJob
from airflow_provider_eh.spark.mapping import RowMapping


def test_a_bad_hold_relay_address_fails_before_any_claim() -> None:
    publisher = SimpleNamespace(send_attempts=3, send_timeout=60.0)  # never asked to claim
    with pytest.raises(ValueError, match=r"hold_relay='driver:http': give a host name or address"):
        SparkPublishJob(None, publisher, RowMapping(key_column="k"), hold_relay="driver:http")  # type: ignore[arg-type]
    job = SparkPublishJob(None, publisher, RowMapping(key_column="k"), hold_relay="driver:7078")  # type: ignore[arg-type]
    assert job.relay_address() == ("driver", 7078)
    assert SparkPublishJob(None, publisher, RowMapping(key_column="k"), hold_relay=False).relay_address() is None  # type: ignore[arg-type]
