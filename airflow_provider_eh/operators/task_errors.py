"""How the package's errors become Airflow's, for the operators and the sensors: one rule.

One rule maps an error raised while a task runs (:func:`airflow_error`, applied by :func:`airflow_errors`):

=====================================================  ===============================================
raised                                                 the task
=====================================================  ===============================================
an Airflow exception (fail, skip, sensor timeout, ...)  unchanged: the task already said what it means
an SDK, AMQP, socket, TLS, proxy or storage error       first mapped to the package's error by the one
                                                       map (:mod:`airflow_provider_eh.client.failures`),
                                                       then as that error, below
``EventHubsProviderError`` with ``retryable``           unchanged: fails, and Airflow retries it
``EventHubsProviderError`` without ``retryable``        ``AirflowFailException``: fails without retries
``ValueError`` (an argument, a setting or a target      ``AirflowFailException``: the same input fails
that does not parse, after templating)                  the same way on every retry
anything else                                          unchanged: Airflow's default, retried
a trigger's error event (:func:`trigger_error`)        by its ``retryable`` flag, as the error it
                                                       reports: ``AirflowFailException`` when False,
                                                       else ``AirflowException`` (retried)
=====================================================  ===============================================

A mapped message starts with ``Task '<task id>':`` and keeps the error's own text, which names the
setting, partition or row at fault; an error about a hub or a container that does not name its
connection (the engine's) is led by the connection the task noted for that service. Retryable
errors keep their type, so a caller (or a test) can tell a fenced producer from an unreachable service.

The SDK's errors do not say which connection they were made for: :func:`airflow_errors` is handed the
task's sites, a :class:`~airflow_provider_eh.client.failures.FailureSite` known up front or the operator
itself (:class:`TaskSites`), whose sites are read when an error is raised: those it remembered meanwhile
(its hub once it read the connection, with
:meth:`~airflow_provider_eh.operators.hub_lineage.HubLineage.remember_hub`; the containers of its hooks). An SDK
error raised anywhere in the task is mapped naming them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

from airflow_provider_eh.client.failures import FailureSite, is_storage_error, provider_error
from airflow_provider_eh.errors import (
    CheckpointStoreError,
    EventHubsProviderError,
    HubFencingUnavailableError,
    ProducerStateStoreError,
    TriggerReportedError,
    UnknownEventHubError,
    UnknownPartitionError,
)
from airflow_provider_eh.publishing.driver import Progress, progress_of

if TYPE_CHECKING:
    pass


class TaskSites:
    """Mixin of the operators whose connections are read while the task runs: the sites they learn (their hub, the
    containers of their hooks), handed to the task's error mapping as ``airflow_errors(self.task_id, self)``."""

    #: the sites remembered so far, in order (the last of a service wins)
    _known_sites: tuple[FailureSite, ...] = ()

    def remember_site(self, site: FailureSite | None) -> None:
        """Name ``site`` (``None``: nothing) as where this task's SDK errors of its service happen."""
        if site is not None and site not in self._known_sites:
            self._known_sites = (*self._known_sites, site)

    def failure_sites(self) -> tuple[FailureSite, ...]:
        """The sites remembered so far."""
        return self._known_sites


def _sites(sources: Iterable[FailureSite | TaskSites]) -> list[FailureSite]:
    """The sites of ``sources`` now: a site as it is, an operator's as it remembered them."""
    return [site for source in sources
            for site in ((source,) if isinstance(source, FailureSite) else source.failure_sites())]


def airflow_error(exc: BaseException, task_id: str) -> BaseException:
    """The exception a task raises in place of ``exc`` (``exc`` itself when it stays as it is); see the module's table."""
    if isinstance(exc, AirflowException):
        return exc
    if isinstance(exc, EventHubsProviderError):
        if exc.retryable:
            return exc
        named = f"Connection {exc.conn_id!r}: "
        lead = named if exc.conn_id and named not in str(exc) else ""
        return AirflowFailException(f"Task {task_id!r}: {lead}{exc}")
    if isinstance(exc, ValueError):
        return AirflowFailException(f"Task {task_id!r}: {exc}")
    return exc


def trigger_error(task_id: str, doing: str, event: Mapping[str, Any]) -> BaseException:
    """
    The exception a task raises for a trigger's ``{"status": "error", "message": ..., "retryable": ...}``.

    A trigger cannot hand over the exception itself, so it reports whether a retry can help; the
    error is then mapped by :func:`airflow_error` like the same error raised in the task. An event
    without the flag (written by an older trigger) counts as retryable. The message reads
    ``Task '<id>': <doing> failed: <the trigger's message>``.
    """
    reported = TriggerReportedError(f"{doing} failed: {event.get('message', '')}", event.get("retryable") is not False)
    mapped = airflow_error(reported, task_id)
    return AirflowException(f"Task {task_id!r}: {reported}") if mapped is reported else mapped


def sdk_failure(exc: BaseException, sites: Iterable[FailureSite]) -> BaseException:
    """The package's error for an SDK or network error raised at one of ``sites`` (``exc`` itself when the
    map does not read it, or no site of its service is known).

    Storage errors (azure-core's, not raised through the Event Hubs SDK) go to the blob site, every other
    one to the Event Hubs site; the last site added of the service wins.
    """
    storage = is_storage_error(exc)
    for site in reversed(list(sites)):
        if (site.service == "blob storage") == storage:
            return provider_error(exc, site) or exc
    return exc


#: the package's errors raised below the task without its connection id (the engine knows an endpoint or a
#: container, not the Airflow connection), and the service whose site names it
_ABOUT_A_SERVICE: tuple[tuple[type[EventHubsProviderError], str], ...] = (
    (UnknownEventHubError, "Event Hubs"),
    (UnknownPartitionError, "Event Hubs"),
    (HubFencingUnavailableError, "Event Hubs"),
    (ProducerStateStoreError, "blob storage"),
    (CheckpointStoreError, "blob storage"),
)


def _name_connection(exc: BaseException, sites: Iterable[FailureSite]) -> None:
    """Give ``exc`` the connection id of its service's site when it names none (its message then leads with it)."""
    if not isinstance(exc, EventHubsProviderError) or exc.conn_id:
        return
    service = next((svc for cls, svc in _ABOUT_A_SERVICE if isinstance(exc, cls)), None)
    site = next((s for s in reversed(list(sites)) if s.service == service), None)
    if site is not None:
        exc.conn_id = site.conn_id


@contextmanager
def airflow_errors(task_id: str, *sites: FailureSite | TaskSites) -> Iterator[None]:
    """Raise what :func:`airflow_error` maps an error to, chained to the original; an SDK error is first
    mapped by :func:`sdk_failure` at ``sites``: each a site, or an operator whose sites are read then
    (:class:`TaskSites`: those it remembered while the task ran)."""
    try:
        yield
    except Exception as exc:
        known = _sites(sites)
        progress = progress_of(exc)
        at = known
        if progress is not None:  # the partitions committed and pending, in place of the task's general words
            at = [s.having_done(progress.sentence(_retryable(exc, known))) if s.service == "Event Hubs" else s
                  for s in known]
        provider = sdk_failure(exc, at)
        _name_connection(provider, known)
        if progress is not None:
            _tell_progress(provider, progress)
        mapped = airflow_error(provider, task_id)
        if mapped is exc:
            raise
        if provider is not exc:  # the chain reads: Airflow's error, from the package's, from the SDK's
            provider.__cause__ = exc
        raise mapped from provider


def _retryable(exc: BaseException, sites: Iterable[FailureSite]) -> bool:
    """Whether Airflow retries the task for ``exc`` (as :func:`airflow_error` will decide)."""
    provider = sdk_failure(exc, sites)
    if isinstance(provider, AirflowException):
        return not isinstance(provider, AirflowFailException)
    return isinstance(provider, EventHubsProviderError) and provider.retryable


def _tell_progress(exc: BaseException, progress: Progress) -> None:
    """End the message of the package's ``exc`` with the partitions committed and pending, unless it says them."""
    if not isinstance(exc, EventHubsProviderError) or not exc.args:
        return
    committed_or_not = (progress.sentence(True), progress.sentence(False))
    if not any(sentence in str(exc) for sentence in committed_or_not):
        exc.args = (f"{exc.args[0]} {progress.sentence(exc.retryable)}", *exc.args[1:])
