"""Bad Spark output fails with a message naming what is at fault and what to do, before any partition is
claimed: after the error, the corrected output publishes under the same batch id."""

from __future__ import annotations

from typing import Any

import pytest
from spark_kit import SparkSetup, batch, write_orders

from airflow_provider_eh.errors import (
    EmptyOutputError,
    EventTooLargeError,
    InvalidEventError,
    OutputNotFoundError,
    SparkPublishError,
)
from airflow_provider_eh.spark.job import SparkSource


def assert_nothing_claimed(setup: SparkSetup) -> None:
    """No producer state was written and nothing was sent: a retry starts from scratch."""
    assert list(setup.publisher().store.container.list_blobs()) == []
    assert set(setup.ends().values()) == {-1}


def test_missing_path_names_the_path(spark: Any, setup: SparkSetup) -> None:
    missing = str(setup.tmp / "orders" / "2026-05-01")
    with pytest.raises(OutputNotFoundError, match=rf"parquet output {missing}: does not exist\. Did the upstream Spark job"):
        setup.publish(spark, missing, batch("missing"))
    assert_nothing_claimed(setup)


def test_empty_output_succeeds_with_nothing_published_or_fails_when_asked(spark: Any, setup: SparkSetup) -> None:
    empty = str(setup.tmp / "empty")
    spark.range(0).selectExpr("id", "'c' as customer", "1 as region").write.parquet(empty)
    assert setup.publish(spark, empty, batch("empty")) == {}
    with pytest.raises(EmptyOutputError, match="the output has no rows; nothing to publish. on_empty='fail'"):
        setup.publish(spark, empty, batch("empty"), on_empty="fail")
    assert_nothing_claimed(setup)


def test_row_over_one_mib_names_its_key_and_a_retry_with_fixed_output_publishes(spark: Any, setup: SparkSetup) -> None:
    path = str(setup.tmp / "big")
    spark.range(0, 500).selectExpr(
        "id", "concat('customer-', cast(id as string)) as customer", "1 as region",
        "if(id = 321, repeat('x', 1100000), 'small') as pad",
    ).write.parquet(path)
    with pytest.raises(EventTooLargeError, match=r"row with customer='customer-321', id=321 \(partition \d\): 11000\d\d bytes "
                                                 r"of body and properties exceed the 1047552-byte limit"):
        setup.publish(spark, path, batch("big"))
    assert_nothing_claimed(setup)
    fixed = str(setup.tmp / "fixed")
    spark.read.parquet(path).where("id != 321").write.parquet(fixed)
    results = setup.publish(spark, fixed, batch("big"))
    assert sum(r.events for r in results.values()) == 499 and {r.status for r in results.values()} == {"published"}


def test_null_key_names_the_row_and_the_column(spark: Any, setup: SparkSetup) -> None:
    path = str(setup.tmp / "nullkey")
    spark.range(0, 100).selectExpr("id", "if(id = 42, null, concat('c', id)) as customer", "1 as region").write.parquet(path)
    with pytest.raises(InvalidEventError, match=r"row with customer=None, id=42: key column 'customer' is null; every row "
                                                r"needs a key"):
        setup.publish(spark, path, batch("nullkey"))
    assert_nothing_claimed(setup)


def test_partition_not_in_hub_and_null_partition_are_named(spark: Any, setup: SparkSetup) -> None:
    path = str(setup.tmp / "pids")
    spark.range(0, 100).selectExpr("id", "cast(id % 5 as string) as pid").write.parquet(path)
    mapping = {"partition_column": "pid", "order_by": ["id"]}
    with pytest.raises(InvalidEventError, match=r"row with pid='4', id=\d+: partition '4' \(column 'pid'\) does not exist; "
                                                r"the hub has partitions 0, 1, 2, 3"):
        setup.publish(spark, path, batch("pids"), mapping)
    nulls = str(setup.tmp / "nullpids")
    spark.range(0, 10).selectExpr("id", "if(id = 7, null, '1') as pid").write.parquet(nulls)
    with pytest.raises(InvalidEventError, match=r"row with pid=None, id=7: partition column 'pid' is null"):
        setup.publish(spark, nulls, batch("pids"), mapping)
    assert_nothing_claimed(setup)


def test_schema_without_declared_columns_names_them_and_lists_the_columns(spark: Any, setup: SparkSetup) -> None:
    path = write_orders(spark, str(setup.tmp / "orders"), 10)
    mapping = {"key_column": "customer_id", "property_columns": ["region", "channel"], "order_by": ["id"]}
    with pytest.raises(InvalidEventError, match=rf"parquet output {path}: the output has no column 'customer_id', 'channel' "
                                                r"\(declared in the operator\); it has id, customer, region, order_id"):
        setup.publish(spark, path, batch("schema"), mapping)
    assert_nothing_claimed(setup)


def test_delta_format_without_delta_spark_says_what_to_install(spark: Any) -> None:
    pytest.importorskip("pyspark")
    try:
        import delta  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("delta-spark is installed")
    with pytest.raises(SparkPublishError, match=r"format 'delta' needs the delta-spark package: install the provider's `delta` extra"):
        SparkSource(path="/data/orders", format="delta").read(spark)
