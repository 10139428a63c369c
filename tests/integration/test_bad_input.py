"""Bad input refused with an error that names the field and what to do, and nothing already accepted lost:
each test publishes a good batch first, feeds the bad input, checks the error text, reads the hub back
(the good batch still exactly once, the bad one not sent or completed by the retry the error asks for).

Each case runs on both paths of the one engine (``[local]``: ``IdempotentPublisher.publish`` and
``EventHubPublishOperator``; ``[spark]``: ``SparkPublishJob`` and ``SparkToEventHubOperator`` over the
same events written as Parquet), with one Spark session for the module, started only by a Spark case.

Rows covered elsewhere (see the bad-input table of docs/exactly-once.md): oversize event and wrong partition id
(``test_bad_event_fails_before_anything_is_sent``), unknown hub
(``test_unknown_hub_and_unknown_partition_option_are_named``), corrupt or foreign state blob and wrong
state version (``test_corrupt_or_foreign_state_blob_is_named_with_how_to_reset``) and content changed on
retry (``test_retry_with_changed_content_fails_and_sends_nothing``), all in
``tests/integration/publishing/test_publish_behaviour.py``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from azure.storage.blob import ContainerClient

sys.path.insert(0, str(Path(__file__).with_name("publishing")))
from publish_kit import PublishSetup, assert_exactly_once, batch, events_for  # noqa: E402

from eventhubs_local import EmulatorProcess  # noqa: E402
from airflow_provider_eh.client.endpoint import EventHubsEndpoint  # noqa: E402
from airflow_provider_eh.errors import (  # noqa: E402
    CredentialRefusedError,
    InvalidProducerStateError,
    ProducerStateStoreError,
)
from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher, VariableProducerStateStore  # noqa: E402
from airflow_provider_eh.client.readback import read_hub  # noqa: E402
from airflow_provider_eh.publishing.driver import Progress, progress_of  # noqa: E402
from tests.conftest import connection_env, intact_airflow_db, unique_name  # noqa: E402

SAS_KEY_NAME, SAS_KEY = "publisher", "the-right-key-for-bad-input-tests"
PATHS = ("local", "spark")
# The events of publish_kit.events_for as rows: the body as its canonical JSON, the partition and property "i".
SPARK_MAPPING = {"body_column": "body", "partition_column": "partition_id", "property_columns": ("i",), "order_by": ("i",)}

Publish = Callable[[IdempotentPublisher, list[dict[str, Any]], str], Any]


def write_rows(events: list[dict[str, Any]], directory: Path) -> str:
    """``events`` (with ``partition_id``) as a Parquet file of the rows :data:`SPARK_MAPPING` reads."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{unique_name('rows')}.parquet"
    pq.write_table(pa.table({
        "body": [json.dumps(e["body"], sort_keys=True, separators=(",", ":")) for e in events],
        "partition_id": [e["partition_id"] for e in events],
        "i": [e["properties"]["i"] for e in events],
    }), str(path))
    return str(path)


@pytest.fixture(params=PATHS)
def publish(request: pytest.FixtureRequest, tmp_path: Path) -> Publish:
    """``publish(publisher, events, batch_id)`` on the parametrised path: in-process, or through a Spark job."""
    if request.param == "local":
        return lambda publisher, events, batch_id: publisher.publish(events, batch_id=batch_id)
    from airflow_provider_eh.spark.job import SparkPublishJob, SparkSource
    from airflow_provider_eh.spark.mapping import RowMapping

    spark = request.getfixturevalue("spark")

    def through_spark(publisher: IdempotentPublisher, events: list[dict[str, Any]], batch_id: str) -> Any:
        source = SparkSource(path=write_rows(events, tmp_path))
        return SparkPublishJob(spark, publisher, RowMapping(**SPARK_MAPPING)).publish(source, batch_id)

    return through_spark


def id_counts(read: list[Any]) -> Counter:
    return Counter(json.loads(e.body)["id"] for e in read)


@pytest.fixture
def setup(event_hubs: Any, azurite: Any, hub: str, container: str) -> PublishSetup:
    return PublishSetup(event_hubs, azurite, hub, container)


# ---- wrong credentials --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    """A local endpoint that validates SAS tokens against one key (``--require-auth``)."""
    data = tmp_path_factory.mktemp("secured-eh")
    proc = EmulatorProcess(data, extra_args=["--require-auth", "--fsync", "never"], key_name=SAS_KEY_NAME, key=SAS_KEY)
    with proc:
        yield proc


def test_wrong_sas_key_is_refused_before_anything_is_sent_and_the_retry_with_the_right_key_completes(
    secured: EmulatorProcess, azurite: Any, container: str, publish: Publish
) -> None:
    hub = unique_name("auth")
    secured.admin.create_hub(hub, partitions=2)
    state = ContainerClient.from_connection_string(azurite.connection_string, container)
    right = EventHubsEndpoint.from_connection_string(secured.connection_string(hub), hub)
    wrong = EventHubsEndpoint.from_connection_string(
        secured.connection_string(hub).replace(f"SharedAccessKey={SAS_KEY}", "SharedAccessKey=not-the-key"), hub
    )
    earlier, events = events_for("before", 20, partitions=2), events_for("auth", 30, partitions=2)
    IdempotentPublisher(right, BlobProducerStateStore(state), producer_group="g").publish(earlier, batch_id=batch("before"))

    with pytest.raises(CredentialRefusedError) as info:
        publish(IdempotentPublisher(wrong, BlobProducerStateStore(state), producer_group="g"), events, batch("auth"))
    message = str(info.value)
    assert not info.value.retryable
    assert f"127.0.0.1:{secured.port}" in message and hub in message
    assert "the service refused the connection's credential" in message
    assert "Nothing was sent" in message and "SAS key name and key" in message
    assert "not-the-key" not in message
    assert_exactly_once(read_hub(right), earlier)

    publish(IdempotentPublisher(right, BlobProducerStateStore(state), producer_group="g"), events, batch("auth"))
    assert_exactly_once(read_hub(right), earlier + events)


# ---- the state store -----------------------------------------------------------------------------

def test_missing_state_container_is_named_and_nothing_is_sent(setup: PublishSetup, publish: Publish) -> None:
    earlier, events = events_for("before", 20), events_for("late", 20)
    setup.publisher().publish(earlier, batch_id=batch("before"))
    missing = ContainerClient.from_connection_string(setup.azurite.connection_string, "no-such-state")
    publisher = IdempotentPublisher(setup.endpoint, BlobProducerStateStore(missing), producer_group="g")
    with pytest.raises(ProducerStateStoreError) as info:
        publish(publisher, events, batch("late"))
    message = str(info.value)
    assert "the state container 'no-such-state' does not exist in storage account 'devstoreaccount1'" in message
    assert "Nothing was sent" in message and "point state_container at the one holding this group's states" in message
    assert_exactly_once(setup.read_back(), earlier)
    publish(setup.publisher(), events, batch("late"))  # the right container: the batch completes
    assert_exactly_once(setup.read_back(), earlier + events)


@pytest.fixture
def variables(airflow_db: Path) -> Any:
    """Read, write and delete Airflow Variables in the test's metadata DB (as the store does under dag.test)."""
    from airflow.models.variable import Variable

    intact_airflow_db()

    return Variable


def variable_publisher(setup: PublishSetup, group: str, hub: str | None = None) -> IdempotentPublisher:
    from airflow_provider_eh.hooks.producer_state import AirflowVariables

    endpoint = setup.endpoint if hub is None else setup.endpoint.with_hub(hub)
    return IdempotentPublisher(endpoint, VariableProducerStateStore(AirflowVariables()), producer_group=group)


@pytest.mark.parametrize(
    ("content", "why", "publish"),
    # the version check reads the document as the JSON check does, on either path: the Spark path runs one of them
    [("not json", "is not JSON", "local"), ("not json", "is not JSON", "spark"),
     ('{"version": 99}', "has version 99, this provider reads versions 1, 2", "local")],
    indirect=["publish"],
)
def test_corrupt_state_variable_fails_its_partition_only_and_the_retry_after_reset_completes(
    setup: PublishSetup, variables: Any, content: str, why: str, publish: Publish, request: pytest.FixtureRequest
) -> None:
    group = unique_name("var")
    earlier, events = events_for("before", 40), events_for("after", 40)
    variable_publisher(setup, group).publish(earlier, batch_id=batch("before"))
    name = f"eh_producer_state.{group}.0"
    variables.set(name, content)

    with pytest.raises(InvalidProducerStateError) as info:
        publish(variable_publisher(setup, group), events, batch("after"))
    message = str(info.value)
    assert f"producer state Airflow Variable {name!r} for group {group!r} partition 0" in message
    assert why in message and f"`airflow variables delete {name}`" in message
    read = setup.read_back()
    counts = id_counts(read)
    assert all(counts[e["body"]["id"]] == 1 for e in earlier)  # what was accepted stays, once
    sent = [e for e in events if counts[e["body"]["id"]]]
    # The local path runs each partition on its own; the Spark path claims every partition before its one
    # send job, so a partition it cannot claim stops the run before anything is sent.
    others = {"1", "2", "3"} if request.node.callspec.params["publish"] == "local" else set()
    assert {e["partition_id"] for e in sent} == others and all(counts[e["body"]["id"]] == 1 for e in sent)
    assert not any(e.partition == "0" and json.loads(e.body)["id"].startswith("after") for e in read)
    # the error carries what is committed and what a retry resumes; the task's message says it (operators)
    assert progress_of(info.value) == Progress(tuple(sorted(others)), tuple(sorted({"0", "1", "2", "3"} - others)))

    variables.delete(name)  # what the error says to do; partition 0's retry then sends its share, once
    publish(variable_publisher(setup, group), events, batch("after"))
    assert id_counts(setup.read_back()) == Counter({e["body"]["id"]: 1 for e in earlier + events})


def test_state_variable_of_another_hub_is_refused_naming_both_hubs(
    setup: PublishSetup, variables: Any, publish: Publish
) -> None:
    group = unique_name("shared")
    other = unique_name("other")
    setup.event_hubs.admin.create_hub(other, partitions=4)
    earlier, events = events_for("before", 20), events_for("elsewhere", 20)
    variable_publisher(setup, group).publish(earlier, batch_id=batch("before"))

    with pytest.raises(InvalidProducerStateError) as info:
        publish(variable_publisher(setup, group, hub=other), events, batch("elsewhere"))
    message = str(info.value)
    ns = setup.endpoint.namespace
    assert f"belongs to hub {ns}/{setup.hub}, not {ns}/{other}" in message
    assert "give this task its own producer_group" in message and "do not delete it" in message
    other_endpoint = setup.endpoint.with_hub(other)
    assert read_hub(other_endpoint) == []
    assert_exactly_once(setup.read_back(), earlier)

    publish(variable_publisher(setup, f"{group}-b", hub=other), events, batch("elsewhere"))
    assert_exactly_once(read_hub(other_endpoint), events)
    assert_exactly_once(setup.read_back(), earlier)


# ---- operator arguments out of range ---------------------------------------------------------------

@pytest.fixture(scope="module")
def operator_hub(event_hubs: Any, azurite: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One hub and state container for the argument tests, with one good batch published through the operator,
    and the bad batch as Parquet rows for the Spark operator."""
    from azure.storage.blob import BlobServiceClient

    hub, container = unique_name("args"), unique_name("c")
    event_hubs.admin.create_hub(hub, partitions=4)
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(container)
    with pytest.MonkeyPatch.context() as mp:
        for name, value in (
            connection_env("eh_args", "azure_event_hubs", extra={"connection_string": event_hubs.connection_string(hub)}),
            connection_env("wasb_args", "wasb", extra={"connection_string": azurite.connection_string}),
            connection_env("spark_args", "spark", host="local[2]"),
        ):
            mp.setenv(name, value)
        good = events_for("good", 40)
        run_operator(container, events=good)
        endpoint = EventHubsEndpoint.from_connection_string(event_hubs.connection_string(hub), hub)
        rows = write_rows(events_for("bad", 8), tmp_path_factory.mktemp("bad-rows"))
        yield {"hub": hub, "container": container, "endpoint": endpoint, "good": good, "rows": rows}


def run_operator(container: str, path: str = "local", rows: str | None = None, **arguments: Any) -> Any:
    """``EventHubPublishOperator.execute`` (``path="local"``) or ``SparkToEventHubOperator.execute`` over
    ``rows`` (``"spark"``) with the context of the 2026-05-01 interval's first try."""
    from airflow_provider_eh.operators.publish import EventHubPublishOperator
    from airflow_provider_eh.operators.spark_publish import SparkToEventHubOperator

    arguments = {"event_hubs_conn_id": "eh_args", "wasb_conn_id": "wasb_args", "state_container": container,
                 "producer_group": "args.publish", **arguments}
    if path == "local":
        operator: Any = EventHubPublishOperator(task_id="publish", **{"events": events_for("bad", 8), **arguments})
    else:
        operator = SparkToEventHubOperator(task_id="publish", path=rows, spark_conn_id="spark_args", **SPARK_MAPPING,
                                           **arguments)
    start = datetime(2026, 5, 1, tzinfo=timezone.utc)
    context = {"ti": SimpleNamespace(try_number=1, map_index=-1), "data_interval_start": start,
               "data_interval_end": start, "logical_date": start, "run_id": "scheduled__2026-05-01"}
    return operator.execute(context)  # type: ignore[arg-type]


ARGUMENTS = [
    ({"generation": -1}, "generation=-1: must be a whole number >= 0; bump it by one"),
    ({"generation": "two"}, "generation='two': must be a whole number >= 0"),
    ({"lease_seconds": 10}, r"lease_seconds=10: must be a whole number between 15 and 60 \(Azure Blob lease limits\)"),
    ({"lease_seconds": 61}, "lease_seconds=61: must be a whole number between 15 and 60"),
    ({"send_attempts": 0}, "send_attempts=0: must be a whole number >= 1"),
    ({"keep_committed": 0}, "keep_committed=0: must be a whole number >= 1 or None; a pruned batch is published again"),
    ({"keep_committed_days": 0}, "keep_committed_days=0: must be a number of days above 0, or None; a pruned batch"),
    ({"claim_timeout": -5}, "claim_timeout=-5: must be a number of seconds >= 0"),
    ({"partition_options": {"0": {"owner": 2}}}, r"partition_options\['0'\]: unknown option\(s\) owner; allowed: "),
    ({"partition_options": {"1": {"owner_level": -1}}}, r"partition_options\['1'\]\['owner_level'\]=-1: must be a whole number >= 0"),
    ({"state_backend": "s3"}, "state_backend 's3': choose one of blob, variable"),
]


@pytest.mark.parametrize(
    ("arguments", "message"),
    ARGUMENTS,
    ids=["negative-generation", "text-generation", "short-lease", "long-lease", "no-attempts", "keep-none", "keep-no-days",
         "negative-claim-timeout", "unknown-partition-option", "negative-owner-level", "unknown-backend"],
)
def test_argument_out_of_range_fails_the_task_naming_it_and_sends_nothing(
    operator_hub: dict[str, Any], arguments: dict[str, Any], message: str
) -> None:
    from airflow.providers.common.compat.sdk import AirflowFailException

    with pytest.raises(AirflowFailException, match=f"^Task 'publish': {message}"):
        run_operator(operator_hub["container"], **arguments)
    assert_exactly_once(read_hub(operator_hub["endpoint"]), operator_hub["good"])


def test_argument_out_of_range_fails_the_spark_task_naming_it_and_sends_nothing(operator_hub: dict[str, Any]) -> None:
    """Every case above on ``SparkToEventHubOperator``: refused before a Spark session starts; one read-back at
    the end finds nothing of any of them sent."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    for arguments, message in ARGUMENTS:
        with pytest.raises(AirflowFailException, match=f"^Task 'publish': {message}"):
            run_operator(operator_hub["container"], "spark", operator_hub["rows"], **arguments)
    assert_exactly_once(read_hub(operator_hub["endpoint"]), operator_hub["good"])
