"""The fault table as data: each fault, each path it can happen on, and what the user gets there.

``test_failure_matrix.py`` makes every fault for real and runs every cell of :data:`CELLS`;
``scripts/failure_table.py`` writes the same cells into ``docs/failures.md``, and
``tests/docs/test_failure_table.py`` fails when the page differs from them, so the table and the
tests cannot drift.

A cell's ``says`` are parts its error message must hold, with placeholders the test fills in for the
fault at hand: ``{conn}`` the Event Hubs connection id, ``{wasb}`` the blob connection id,
``{address}`` the namespace's or gateway's ``host:port``, ``{proxy}`` the proxy's ``host:port``,
``{hub}``, ``{group}`` and ``{container}``. ``retry`` is ``fail`` (the task fails without using its
retries: nothing changes until someone changes a setting) or ``retry`` (Airflow retries it).
``within`` bounds the seconds from the start of the call to the error: small where nothing can
change, so no cell waits out a timeout.

This module imports nothing: the docs script reads it without the test's dependencies.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fault:
    """One way a deployment goes wrong, and how the test makes it for real."""

    key: str
    title: str
    made_by: str


@dataclass(frozen=True)
class Path:
    """One place of the provider where the fault can surface."""

    key: str
    title: str


@dataclass(frozen=True)
class Cell:
    """What the user gets when ``fault`` happens on ``path``.

    :param says: parts of the error message (placeholders: see the module docstring).
    :param retry: ``fail`` (no retries) or ``retry``.
    :param lands: what has landed when the error is raised, in words (the test reads it back).
    :param within: seconds the path may take to raise it.
    :param gap: why the path does not do this yet (the test expects it to fail; the table says so); empty: it does.
    """

    fault: str
    path: str
    says: tuple[str, ...]
    retry: str
    lands: str
    within: float
    gap: str = ""

    @property
    def id(self) -> str:
        return f"{self.fault}-{self.path}"


FAULTS = {f.key: f for f in (
    Fault("wrong_sas_key", "wrong SAS key", "the endpoint with `--require-auth`, the connection string's key changed"),
    Fault("expired_sas_token", "expired SAS token", "a `SharedAccessSignature` connection string signed with an expiry in the past"),
    Fault("proxy_wrong_password", "wrong proxy password", "a real HTTP proxy (`proxy.py`) with Basic authentication, another password"),
    Fault("proxy_refuses_connect", "proxy refuses CONNECT", "`proxy.py` with a rule that answers every CONNECT with 403"),
    Fault("proxy_down", "proxy down", "the proxy fields name a closed port"),
    Fault("wrong_ca", "CA bundle does not match", "a TLS gateway whose certificate a private CA signed; `ca_bundle` names another CA"),
    Fault("custom_endpoint_unresolvable", "custom endpoint address does not resolve",
          "`custom_endpoint_address` is `sb://no-such-host.invalid:443`"),
    Fault("namespace_unresolvable", "namespace does not resolve (DNS)", "the connection string's namespace is `no-such-host.invalid`"),
    Fault("send_right_missing", "credential without the Send right (an identity without Data Sender)",
          "a SAS rule with the `Listen` right only (`--sas-rule`): a valid key the service refuses to send with"),
    Fault("listen_right_missing", "credential without the Listen right (an identity without Data Receiver)",
          "a SAS rule with the `Send` right only: a valid key the service refuses to read with"),
    Fault("hub_missing", "hub missing", "the hub name is one the namespace does not have"),
    Fault("hub_deleted_mid_run", "hub deleted mid-run",
          "the endpoint's admin deletes the hub once the task has claimed its partitions; live links are detached "
          "with `amqp:not-found`"),
    Fault("consumer_group_deleted_mid_run", "consumer group deleted mid-run",
          "the endpoint's admin deletes the group while the path reads it; its links are detached with `amqp:not-found`"),
    Fault("consumer_group_missing", "consumer group missing", "the consumer group is one the hub does not have"),
    Fault("container_missing", "container missing", "the container is one the storage account does not have"),
    Fault("storage_forbidden", "storage answers 403", "Azurite with the blob connection's account key changed"),
    Fault("server_busy", "ServerBusy beyond the retries", "the endpoint's `server_busy` fault, held for the whole send"),
    Fault("endpoint_gone_mid_send", "endpoint goes away mid-send", "the endpoint SIGKILLed after the first SDK batch is acknowledged"),
)}

PATHS = {p.key: p for p in (
    Path("publish", "`EventHubPublishOperator`"),
    Path("test_connection", "`EventHubHook.test_connection`"),
    Path("event_trigger", "`EventHubEventTrigger` (asset watcher)"),
    Path("queue", "`MessageQueueTrigger(scheme=\"eventhubs\")`"),
    Path("await_sensor", "`EventHubAwaitEventSensor`, deferred (its trigger, then `execute_complete`)"),
    Path("checkpoint_sensor", "`EventHubCheckpointSensor`, deferred (its trigger, then `execute_complete`)"),
    Path("ingest", "`EventHubIngestOperator`"),
    Path("checkpoint_poke", "`EventHubCheckpointSensor`, in poke mode"),
    Path("readback", "reading the hub back (a publish in doubt; `airflow_provider_eh.testing`)"),
    Path("view", "the Event Hubs view (its API answers with the message)"),
    Path("spark_publish", "`SparkToEventHubOperator` (the sends on Spark executors, mapped on the driver)"),
)}

NOTHING_SENT = "nothing sent"
NOTHING_READ = "no checkpoint written"
NOTHING_LOADED = "no row loaded; SQL checkpoint unchanged"

# Where each kind of fault points the user: the connection, the address, the field to check.
_CREDENTIAL = ("{conn}", "{address}", "refused the connection's credential", "SAS key name and key")
_PROXY = ("{conn}", "through HTTP proxy {proxy}")
_TLS = ("{conn}", "{address}", "certificate is not trusted", "ca_bundle")
_ADDRESS = ("{conn}", "no-such-host.invalid", "does not resolve", "custom_endpoint_address")
_DNS = ("{conn}", "no-such-host.invalid", "does not resolve", "connection_string")
_HUB = ("{conn}", "{hub}", "does not exist", "eventhub_name")
_GROUP = ("{conn}", "{group}", "does not exist", "consumer_group")


#: cells whose path does not yet do what the cell says, and why: the matrix expects them to fail (strict
#: xfail), so a fix shows as an unexpected pass and the entry goes
GAPS: dict[str, str] = {}


def _cells() -> list[Cell]:
    cells: list[Cell] = []

    def add(fault: str, paths: tuple[str, ...], says: tuple[str, ...], retry: str, within: float,
            lands: dict[str, str] | None = None) -> None:
        default = {"publish": NOTHING_SENT, "spark_publish": NOTHING_SENT, "ingest": NOTHING_LOADED, "test_connection": "nothing (a read)",
                   "readback": "nothing (a read)", "view": "nothing (a read)"}
        for path in paths:
            what = (lands or {}).get(path) or default.get(path, NOTHING_READ)
            cells.append(Cell(fault, path, says, retry, what, within, GAPS.get(f"{fault}-{path}", "")))

    every = ("publish", "test_connection", "event_trigger", "await_sensor", "checkpoint_sensor", "ingest")
    add("wrong_sas_key", (*every, "queue", "checkpoint_poke", "readback", "view", "spark_publish"), _CREDENTIAL, "fail", 15)
    add("expired_sas_token", ("publish", "test_connection", "event_trigger", "await_sensor", "checkpoint_sensor", "ingest"),
        ("{conn}", "{address}", "expired token", "SharedAccessSignature"), "fail", 15)
    add("proxy_wrong_password", ("publish", "test_connection", "event_trigger", "await_sensor", "checkpoint_sensor", "ingest",
                                 "view"),
        (*_PROXY, "407", "proxy_password"), "fail", 15)
    add("proxy_refuses_connect", ("publish", "test_connection", "event_trigger", "await_sensor", "ingest", "readback"),
        (*_PROXY, "403", "proxy_host"), "fail", 15)
    add("proxy_down", ("publish", "test_connection", "event_trigger", "checkpoint_sensor", "ingest", "view"),
        (*_PROXY, "refused the connection"),
        "retry", 20)
    add("wrong_ca", ("publish", "test_connection", "event_trigger", "await_sensor", "checkpoint_sensor", "ingest", "readback",
                     "view"), _TLS, "fail", 15)
    add("custom_endpoint_unresolvable", ("publish", "test_connection", "event_trigger", "await_sensor", "ingest"), _ADDRESS,
        "fail", 15)
    add("namespace_unresolvable", ("publish", "test_connection", "event_trigger", "await_sensor", "checkpoint_sensor", "ingest",
                                   "readback", "view"),
        _DNS, "fail", 15)
    send_right = ("{conn}", "{hub}", "may not send to the hub", "'Send' claim", "Azure Event Hubs Data Sender")
    add("send_right_missing", ("publish",), send_right, "fail", 15)
    # on Spark, the bound holds the job's own start (a cold session's Python workers: up to ~20 s here)
    add("send_right_missing", ("spark_publish",), send_right, "fail", 45)
    add("listen_right_missing", ("event_trigger", "await_sensor", "ingest", "readback"),
        ("{conn}", "{hub}", "may not read from the hub", "'Listen' claim", "Azure Event Hubs Data Receiver"), "fail", 20)
    add("hub_missing", (*every, "queue", "checkpoint_poke", "readback", "view"), _HUB, "fail", 15)
    deleted = ("nothing (the hub is gone); the producer state keeps the intents, and a hub created again under the "
               "name is published to afresh")
    add("hub_deleted_mid_run", ("publish",), _HUB, "fail", 20, {"publish": deleted})
    add("hub_deleted_mid_run", ("spark_publish",), _HUB, "fail", 45, {"spark_publish": deleted})
    add("consumer_group_deleted_mid_run", ("ingest",), _GROUP, "fail", 30,
        {"ingest": "the batches committed before the deletion stay loaded with their SQL checkpoint, once"})
    add("consumer_group_missing", ("event_trigger", "queue", "await_sensor", "ingest", "readback"), _GROUP, "fail", 20)
    add("container_missing", ("checkpoint_sensor", "checkpoint_poke"), ("{wasb}", "{container}", "does not exist"), "fail", 15)
    add("storage_forbidden", ("publish", "event_trigger", "await_sensor", "checkpoint_sensor", "ingest", "checkpoint_poke"),
        ("{wasb}", "127.0.0.1:", "refused the connection's credential", "403"), "fail", 15)
    add("server_busy", ("publish", "spark_publish"), ("{conn}", "{hub}", "busy", "pending: a retry resumes"), "retry", 60,
        {"publish": "nothing stored; the retry after the throttling ends publishes each event once",
         "spark_publish": "nothing stored; the retry after the throttling ends publishes each event once"})
    add("endpoint_gone_mid_send", ("publish",), ("{conn}", "{hub}", "pending: a retry resumes"), "retry", 60,
        {"publish": "what was acknowledged stays; the retry publishes each event once"})
    return cells


CELLS: tuple[Cell, ...] = tuple(_cells())
