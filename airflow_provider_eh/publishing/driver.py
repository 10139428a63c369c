"""The one driver loop of publishing: begin, send, commit, retry; run by local threads and by Spark.

Both paths publish a set of partitions the same way; only *who sends* differs:

* :meth:`IdempotentPublisher.publish <airflow_provider_eh.publishing.IdempotentPublisher.publish>`
  runs :func:`drive` once per partition on a thread, sending in-process;
* :class:`SparkPublishJob <airflow_provider_eh.spark.job.SparkPublishJob>` runs :func:`drive` once
  for all partitions, sending on the executors (one Spark job per attempt).

:func:`drive` takes a "send these planned partitions" function and gets one :class:`SendOutcome`
per partition back: a report to commit, or a failure described as data (an executor's exception
cannot travel back reliably, and a failure must not make Spark retry the task). The retry policy
(:func:`is_transient`, :func:`backoff_seconds`) and the error ranking (:func:`rank_errors`) exist
only here.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from airflow_provider_eh.client.failures import retry_can_help
from airflow_provider_eh.errors import EventHubsProviderError, ProducerDisconnectedError
from airflow_provider_eh.stamps import batch_stamp
from airflow_provider_eh.steps import reached

if TYPE_CHECKING:
    from airflow_provider_eh.publishing.plan import PartitionResult
    from airflow_provider_eh.publishing.sender import SendReport
    from airflow_provider_eh.publishing.session import PartitionSession

log = logging.getLogger(__name__)

T = TypeVar("T")


class PartitionPublisher(Protocol):
    """What :func:`drive` needs of a publisher (:class:`~airflow_provider_eh.publishing.IdempotentPublisher`)."""

    producer_group: str

    def begin(self, partition_id: str, batch_id: str, event_count: int, fingerprint: str, *,
              producer: Any = None) -> PartitionSession: ...

    def commit(self, session: PartitionSession, report: SendReport | None, *, producer: Any = None) -> PartitionResult: ...

    def abort(self, session: PartitionSession) -> None: ...


def is_transient(exc: BaseException) -> bool:
    """
    True when a new in-process attempt (read-back, then resend) can cure ``exc``.

    Transient: the SDK's connection, timeout and server-busy errors, and our errors that say they
    are retryable. Not transient: authentication, what the error map calls a setting to fix (a missing
    hub, a credential without the right), a closed client, bad input, anything unknown, and
    :class:`ProducerDisconnectedError` although an Airflow retry may cure it (its ``retryable`` is
    True). It means another publisher claimed the partition (or our lease could not be renewed): an
    immediate in-process attempt would claim again with a higher owner level and fence that
    publisher in the middle of its batch, so the two would take the partition from each other in
    turn. Airflow's retry, after its back-off, is the right place to try again. (The executor's old
    copy of this rule treated it as transient; no executor can raise it, since executors hold no
    claim, so the one rule changes nothing there.)
    """
    if isinstance(exc, ProducerDisconnectedError):
        return False
    if isinstance(exc, EventHubsProviderError):
        return exc.retryable
    try:
        from azure.eventhub.exceptions import AuthenticationError, ClientClosedError, EventHubError
    except ImportError:  # pragma: no cover - the SDK is a hard dependency
        return False
    if not isinstance(exc, EventHubError) or isinstance(exc, (AuthenticationError, ClientClosedError)):
        return False
    # the error map tells a setting to fix (a hub deleted, a credential without the Send right) from a failure that
    # may pass: no attempt is spent on the former
    return retry_can_help(exc) is not False


def is_retryable(exc: BaseException) -> bool:
    """True when an Airflow retry may help: our errors say so; otherwise a transient SDK error."""
    if isinstance(exc, EventHubsProviderError):
        return exc.retryable
    return is_transient(exc)


def backoff_seconds(attempt: int) -> float:
    """Seconds to wait after failed in-process attempt ``attempt`` (1-based) before the next."""
    return min(2.0**attempt, 10.0)


def rank_errors(errors: list[tuple[str, T]], retryable: Callable[[Any], bool] = is_retryable) -> list[tuple[str, T]]:
    """
    ``(partition, error)`` pairs, the ones no retry can cure first (so they are the ones raised).

    The rule is :func:`is_retryable`, for exceptions and for :class:`SendOutcome` alike (an outcome
    carries the rule's answer, ``lambda o: o.retryable``): an SDK ``AuthenticationError`` on one
    partition is raised before a fenced producer on another, whichever path published them.
    """
    return sorted(errors, key=lambda item: retryable(item[1]))


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else ""


@dataclass(frozen=True)
class SendOutcome:
    """
    What sending one planned partition did: ``report`` on success, else a failure as data.

    :param partition_id: the partition.
    :param report: the sender's report (success), ``None`` on failure.
    :param error_type: the failure's exception type name (or ``RetriedSparkTask``, ``MissingReport``).
    :param message: the failure's first line.
    :param transient: a new in-process attempt may cure the failure (:func:`is_transient`).
    :param retryable: an Airflow retry may (:func:`is_retryable`).
    :param error: the exception itself, on the local path only (never pickled across processes).
    """

    partition_id: str
    report: SendReport | None = None
    error_type: str | None = None
    message: str = ""
    transient: bool = False
    retryable: bool = False
    error: BaseException | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return self.error_type is None

    @classmethod
    def sent(cls, partition_id: str, report: SendReport | None) -> SendOutcome:
        return cls(partition_id, report)

    @classmethod
    def failed(cls, partition_id: str, exc: BaseException, *, keep: bool = False) -> SendOutcome:
        """The failure ``exc``; ``keep`` carries the exception itself (same process only)."""
        return cls(partition_id, None, type(exc).__name__, _first_line(exc), is_transient(exc), is_retryable(exc),
                   exc if keep else None)

    @classmethod
    def refused(cls, partition_id: str, error_type: str, message: str) -> SendOutcome:
        """A send that did not happen for a reason recovery handles (read-back next attempt)."""
        return cls(partition_id, None, error_type, message, True, True)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["error"] = None  # exceptions of the SDK do not all pickle; the fields describe it
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


SendPartitions = Callable[[Mapping[str, "PartitionSession"], Any], Mapping[str, SendOutcome]]
"""``send(sessions, producer) -> {partition: outcome}`` for the sessions whose plan sends something."""

@dataclass(frozen=True)
class Progress:
    """
    What a publish that failed had already done, per partition: the "what already happened" of its error.

    A publish raises one error for all its partitions; the error carries this (:func:`progress_of`)
    so that the task's message can say which partitions are committed and which a later try resumes,
    and the task's metrics count what was done. ``results``: the committed partitions' results, where
    the publish had them.
    """

    committed: tuple[str, ...]
    pending: tuple[str, ...]
    results: tuple[PartitionResult, ...] = field(default=(), compare=False)

    @classmethod
    def of(cls, partitions: Iterable[str], committed: Iterable[str] | Mapping[str, PartitionResult]) -> Progress:
        """The progress of a publish of ``partitions``; ``committed``: the partitions done, or their results."""
        done = set(committed)
        results = tuple(committed[p] for p in _by_number(done)) if isinstance(committed, Mapping) else ()
        return cls(_by_number(done), _by_number(set(partitions) - done), results)

    def sentence(self, retryable: bool) -> str:
        """The sentence for the task's message, e.g. ``Partition 2 committed; partition 3 pending: a retry ...``."""
        if not self.pending:
            return f"{_partitions(self.committed).capitalize()} committed."
        head = (f"{_partitions(self.committed).capitalize()} committed; {_partitions(self.pending)} pending"
                if self.committed else f"Nothing committed, {_partitions(self.pending)} pending")
        them = "it" if len(self.pending) == 1 else "them"
        their = "its" if len(self.pending) == 1 else "their"
        then = "a retry" if retryable else "once that is fixed, a retry (or clearing the task)"
        return f"{head}: {then} resumes {them} and sends each of {their} events once."


def _by_number(partitions: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(partitions, key=lambda p: (not p.isdigit(), int(p) if p.isdigit() else 0, p)))


def _partitions(partitions: tuple[str, ...]) -> str:
    return f"partition{'s' if len(partitions) > 1 else ''} {', '.join(partitions)}"


_PROGRESS = "_eh_progress"


def carry_progress(exc: BaseException, progress: Progress, *, replace: bool = False) -> BaseException:
    """Give ``exc`` what its publish had done (kept when it has one, unless ``replace``); ``exc`` itself."""
    if replace or getattr(exc, _PROGRESS, None) is None:
        setattr(exc, _PROGRESS, progress)
    return exc


def progress_of(exc: BaseException) -> Progress | None:
    """What the publish that raised ``exc`` had done; ``None`` when no publish said."""
    return getattr(exc, _PROGRESS, None)


FailureError = Callable[[str, SendOutcome, Progress], BaseException]
"""``failure(partition, outcome, progress) -> exception`` raised when a send failure ends the run."""


def _begin_all(publisher: PartitionPublisher, batch_id: str, counts: Mapping[str, tuple[int, str]],
               producer: Any) -> dict[str, PartitionSession]:
    """Begin every partition (concurrently when several); if one fails, release the others' claims and raise."""
    if len(counts) == 1:
        ((pid, (count, fp)),) = counts.items()
        return {pid: publisher.begin(pid, batch_id, count, fp, producer=producer)}
    sessions: dict[str, PartitionSession] = {}
    errors: list[tuple[str, BaseException]] = []
    with ThreadPoolExecutor(max_workers=max(1, len(counts)), thread_name_prefix="eh-begin") as pool:
        futures = {pid: pool.submit(contextvars.copy_context().run, publisher.begin, pid, batch_id, c, fp, producer=producer)
                   for pid, (c, fp) in counts.items()}  # in the caller's context: failures name its connection
        for pid, future in futures.items():
            try:
                sessions[pid] = future.result()
            except BaseException as exc:
                errors.append((pid, exc))
    if errors:
        for session in sessions.values():
            publisher.abort(session)
        raise rank_errors(errors)[0][1]
    return sessions


def _default_failure(partition_id: str, outcome: SendOutcome, progress: Progress) -> BaseException:
    if outcome.error is not None:
        return outcome.error
    return EventHubsProviderError(f"partition {partition_id}: send failed ({outcome.error_type}: {outcome.message})")


def drive(
    publisher: PartitionPublisher,
    batch_id: str,
    counts: Mapping[str, tuple[int, str]],
    send: SendPartitions,
    *,
    attempts: int,
    producer_factory: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
    failure: FailureError = _default_failure,
) -> dict[str, PartitionResult]:
    """
    Publish ``counts`` (``{partition: (event count, fingerprint)}``) as batch ``batch_id``.

    Per attempt: begin every partition still to do (claim, settle the ledger, write the intent),
    ``send`` the planned ones, commit each that reports success and abort the others (their intent
    stays for recovery). Transient failures are begun again (read-back first) after
    :func:`backoff_seconds`, up to ``attempts`` attempts; any other failure, or the last attempt's,
    raises ``failure(...)``, the failures no retry can cure first. Whatever it raises carries the
    partitions committed and pending (:func:`progress_of`).

    :param producer_factory: opens one producer client per attempt, handed to ``begin``, ``send`` and
        ``commit`` (the local path); ``None`` when the senders build their own (Spark).
    """
    results: dict[str, PartitionResult] = {}
    try:
        return _drive(publisher, batch_id, counts, send, attempts, producer_factory, failure, results)
    except BaseException as exc:  # what is committed and what is not goes with the error
        carry_progress(exc, Progress.of(counts, results))
        raise


def _drive(publisher: PartitionPublisher, batch_id: str, counts: Mapping[str, tuple[int, str]], send: SendPartitions,
           attempts: int, producer_factory: Callable[[], contextlib.AbstractContextManager[Any]] | None,
           failure: FailureError, results: dict[str, PartitionResult]) -> dict[str, PartitionResult]:
    attempts = max(1, attempts)
    group, stamp = publisher.producer_group, batch_stamp(batch_id)
    todo = dict(counts)
    for attempt in range(1, attempts + 1):
        failed: dict[str, SendOutcome] = {}
        with producer_factory() if producer_factory is not None else contextlib.nullcontext() as producer:
            sessions = _begin_all(publisher, batch_id, todo, producer)
            planned = {pid: s for pid, s in sessions.items() if s.plan.send_count}
            outcomes: Mapping[str, SendOutcome] = {}
            if planned:
                try:
                    outcomes = send(planned, producer)
                except BaseException:
                    for session in sessions.values():
                        publisher.abort(session)
                    raise
                if any(o.ok for o in outcomes.values()):
                    reached("after_send")
            ordered = sorted(sessions.items())
            for n, (pid, session) in enumerate(ordered):
                if pid in planned:
                    outcome = outcomes.get(pid) or SendOutcome.refused(
                        pid, "MissingReport", f"partition {pid}: no send report came back"
                    )
                else:
                    outcome = SendOutcome.sent(pid, None)
                if not outcome.ok:
                    publisher.abort(session)
                    failed[pid] = outcome
                    continue
                try:
                    results[pid] = publisher.commit(session, outcome.report, producer=producer)
                except BaseException:
                    for _, rest in ordered[n + 1:]:
                        publisher.abort(rest)
                    raise
        if not failed:
            return results
        retry = {pid for pid, o in failed.items() if o.transient}
        again = len(retry) == len(failed) and attempt < attempts
        for pid, o in sorted(failed.items()):
            log.warning("group %s partition %s batch %s: send attempt %d of %d failed (%s: %s)%s",
                        group, pid, stamp, attempt, attempts, o.error_type, o.message,
                        "; recovering by read-back" if again else "")
        if not again:
            pid, outcome = rank_errors(sorted(failed.items()), lambda o: o.retryable)[0]
            raise failure(pid, outcome, Progress.of(counts, results))
        todo = {pid: counts[pid] for pid in sorted(retry)}
        time.sleep(backoff_seconds(attempt))
    raise AssertionError("unreachable")
