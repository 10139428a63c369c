"""The one error map inside a task: an SDK error raised anywhere in a task names the task's connection.

The operator hands itself to :func:`airflow_errors` and remembers its hub (:meth:`HubLineage.remember_hub`)
inside it; an SDK error raised after that is mapped at that hub (proxy, address, field), a configuration error becomes
``AirflowFailException`` (no retries) and a transient one keeps the package's retryable type. Spark's
driver maps what an executor reported; the view answers a missing hub with 404. Real exception
objects of the SDK, no network.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException
from azure.core.exceptions import ClientAuthenticationError
from azure.eventhub._pyamqp.error import AMQPConnectionError, ErrorCondition
from azure.eventhub.exceptions import ConnectError, ConnectionLostError, EventHubError

from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.failures import UNKNOWN_CONNECTION, FailureSite, provider_error, site_of
from airflow_provider_eh.client.network import NetworkOptions
from airflow_provider_eh.errors import (
    ConnectionUnreachableError,
    CredentialRefusedError,
    ProxyRefusedError,
    UnknownEventHubError,
)
from airflow_provider_eh.operators.hub_lineage import HubLineage
from airflow_provider_eh.operators.task_errors import airflow_errors
from airflow_provider_eh.publishing.driver import Progress, carry_progress
from airflow_provider_eh.spark.errors import executor_failure

PASSWORD = "pr0xy-password-not-to-show"
ENDPOINT = EventHubsEndpoint.from_connection_string(
    "Endpoint=sb://orders-ns.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey=a2V5LWtleS1rZXk=",
    "orders", network=NetworkOptions.from_fields({"proxy_host": "10.1.2.3", "proxy_port": 3128, "proxy_username": "svc",
                                                  "proxy_password": PASSWORD}))


class Publisher(HubLineage):
    """The part of a publishing operator the error scope sees."""

    hub_role: ClassVar[Literal["input", "output"]] = "output"

    def __init__(self) -> None:
        self.event_hubs_conn_id = "eh_orders"
        self._lineage_hub = None


def proxy_refusal() -> EventHubError:
    from websocket import WebSocketProxyException

    inner = WebSocketProxyException("failed CONNECT via proxy status: 407")
    error = EventHubError(f"{inner}\n{inner}", inner)  # type: ignore[arg-type]
    error.__cause__ = inner
    return error


def run_task(raised: BaseException) -> BaseException:
    publisher = Publisher()
    with pytest.raises(BaseException) as failed, airflow_errors("publish", publisher):
        publisher.remember_hub(ENDPOINT)
        raise raised
    return failed.value


def test_a_refused_proxy_fails_the_task_without_retries_naming_connection_proxy_and_field() -> None:
    error = run_task(proxy_refusal())
    assert isinstance(error, AirflowFailException)
    text = str(error)
    assert text.startswith("Task 'publish': Connection 'eh_orders': Event Hub 'orders' at orders-ns.servicebus.windows.net:443 "
                           "through HTTP proxy 10.1.2.3:3128: the HTTP proxy refused"), text
    assert "proxy_password" in text and "stays recorded in the producer state" in text and PASSWORD not in text
    assert isinstance(error.__cause__, ProxyRefusedError) and isinstance(error.__cause__.__cause__, EventHubError)


def test_a_lost_connection_keeps_a_retryable_type_and_names_the_hub() -> None:
    error = run_task(ConnectionLostError("connection lost"))
    assert type(error) is ConnectionUnreachableError and error.retryable and "Event Hub 'orders'" in str(error)


def test_without_a_remembered_hub_the_sdks_error_passes_as_before() -> None:
    with pytest.raises(ConnectionLostError), airflow_errors("publish"):
        raise ConnectionLostError("lost")


def test_a_storage_error_goes_to_the_blob_site_and_an_event_hubs_error_to_the_hub() -> None:
    blob = FailureSite.of_blob("wasb_state", "https://acct.blob.core.windows.net", container="state",
                               container_field="state_container", role="producer state")
    publisher = Publisher()
    with pytest.raises(AirflowFailException) as failed, airflow_errors("publish", blob, publisher):
        publisher.remember_hub(ENDPOINT)
        raise ClientAuthenticationError(message="Server failed to authenticate the request")
    assert "Connection 'wasb_state'" in str(failed.value) and isinstance(failed.value.__cause__, CredentialRefusedError)


def test_an_endpoint_names_the_connection_it_was_read_from_and_no_other() -> None:
    from dataclasses import replace

    assert site_of(replace(ENDPOINT, conn_id="eh_orders")).conn_id == "eh_orders"
    assert site_of(ENDPOINT).conn_id == UNKNOWN_CONNECTION  # built without a connection
    assert replace(ENDPOINT, conn_id="eh_orders") == ENDPOINT  # one hub, one shared connection, whichever names it


def test_a_hub_remembered_by_another_operator_names_nothing_here() -> None:
    """Nothing is found at a distance: only the sites handed to the task's mapping count."""
    with pytest.raises(ConnectionLostError), airflow_errors("publish", Publisher()):
        Publisher().remember_hub(ENDPOINT)
        raise ConnectionLostError("lost")


def test_an_executors_reported_send_failure_is_mapped_at_the_drivers_site() -> None:
    site = FailureSite.of_endpoint("eh_orders", ENDPOINT, done="2 partitions committed.")
    mapped = executor_failure("EventHubError", "failed CONNECT via proxy status: 407", site)
    assert isinstance(mapped, ProxyRefusedError) and not mapped.retryable
    assert "Connection 'eh_orders'" in str(mapped) and "2 partitions committed." in str(mapped)
    assert executor_failure("InvalidEventError", "event 3: bad", site) is None


def test_an_error_the_executor_already_mapped_gets_the_drivers_connection_id() -> None:
    on_executor = provider_error(ConnectionLostError("lost"), site_of(ENDPOINT))  # no scope there
    assert on_executor is not None and str(on_executor).startswith(f"Connection {UNKNOWN_CONNECTION!r}: ")
    site = FailureSite.of_endpoint("eh_orders", ENDPOINT, done="1 partitions committed.")
    rebuilt = executor_failure(type(on_executor).__name__, str(on_executor), site)
    assert type(rebuilt) is ConnectionUnreachableError and rebuilt.retryable
    assert str(rebuilt).startswith("Connection 'eh_orders': ") and str(rebuilt).endswith("1 partitions committed.")


def test_the_view_answers_a_missing_hub_with_404_and_the_maps_words() -> None:
    from airflow_provider_eh.plugins.readers.reading import read_failure

    amqp = AMQPConnectionError(ErrorCondition.NotFound, description=(
        'Management connection failed. Status code: 404, Description: "The messaging entity \'orders\' could not be found."'))
    missing: Any = ConnectError(str(amqp), amqp)  # type: ignore[arg-type]
    missing.__cause__ = amqp
    error = read_failure("reading the partitions", missing, FailureSite.of_endpoint("eh_orders", ENDPOINT), "hint")
    assert error.status_code == 404 and not error.retryable
    assert "the Event Hub does not exist" in error.message and "did not answer" not in error.message
    assert isinstance(provider_error(missing, FailureSite.of_endpoint("eh_orders", ENDPOINT)), UnknownEventHubError)


def test_the_engines_error_about_the_hub_is_led_by_the_tasks_connection() -> None:
    """The engine knows the endpoint, not the Airflow connection: the task names it."""
    error = run_task(UnknownEventHubError("Event Hub 'orders' on orders-ns.servicebus.windows.net: not found. Nothing was sent."))
    assert isinstance(error, AirflowFailException)
    assert str(error).startswith("Task 'publish': Connection 'eh_orders': Event Hub 'orders' on "), str(error)
    twice = run_task(provider_error(proxy_refusal(), FailureSite.of_endpoint("eh_orders", ENDPOINT)) or ValueError())
    assert str(twice).count("Connection 'eh_orders'") == 1


def test_a_publish_error_says_which_partitions_committed_and_which_a_retry_resumes() -> None:
    lost = carry_progress(ConnectionLostError("connection lost"), Progress.of(["0", "1", "2", "3"], ["0", "2"]))
    error = run_task(lost)
    assert type(error) is ConnectionUnreachableError and error.retryable
    assert "Partitions 0, 2 committed; partitions 1, 3 pending: a retry resumes them and sends each of their events once." \
        in str(error)
    assert "stays recorded in the producer state" not in str(error)  # the task's general words give way


def test_a_configuration_error_says_what_committed_and_that_the_fix_comes_first() -> None:
    refused = carry_progress(proxy_refusal(), Progress.of(["0", "1"], []))
    error = run_task(refused)
    assert isinstance(error, AirflowFailException)
    assert ("Nothing committed, partitions 0, 1 pending: once that is fixed, a retry (or clearing the task) resumes "
            "them and sends each of their events once.") in str(error)


def test_the_packages_own_error_gets_the_partitions_once() -> None:
    from airflow_provider_eh.errors import InvalidProducerStateError

    state = carry_progress(InvalidProducerStateError("partition 0's state is not JSON"), Progress.of(["0", "1"], ["1"]))
    error = run_task(state)
    assert isinstance(error, AirflowFailException)
    assert str(error).count("Partition 1 committed; partition 0 pending: once that is fixed") == 1, str(error)
