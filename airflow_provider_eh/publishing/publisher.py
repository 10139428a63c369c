"""The per-partition protocol: claim, ledger lookup, intent, send, read-back, commit, release.

:class:`IdempotentPublisher` is the driver side. ``publish(events, batch_id=...)`` runs everything,
partitions concurrently on threads. ``begin`` / :func:`~airflow_provider_eh.publishing.sender.send_partition` /
``commit`` are the same steps split where Spark needs them split; what ``begin`` plans under the claim is
:class:`~airflow_provider_eh.publishing.planner.PartitionPlanner`'s.

Two refinements of the written design, both keeping its guarantee:

* Fresh sequence numbers on a resend start above the highest number ever *assigned* to the batch
  (``pending.first_seq + len(pending.indexes)``), not above the highest *seen*: a send that was
  assigned a number and lands late must still be below every resend, or the eh.seq high-water mark
  would drop a resent event.
* A committed batch whose retried content has another fingerprint raises BatchContentChangedError
  instead of silently returning the old result: a backfill over changed data would otherwise report
  success for events it never published.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_provider_eh.client.connection import held
from airflow_provider_eh.client.endpoint import EventHubsEndpoint
from airflow_provider_eh.client.failures import NOTHING_SENT, provider_error, site_of
from airflow_provider_eh.client.fencing import HubFencing, fencing_mode
from airflow_provider_eh.client.partitions import check_partition_ids
from airflow_provider_eh.errors import (
    BatchContentChangedError,
    EventHubsProviderError,
)
from airflow_provider_eh.publishing.claim import StateClaim
from airflow_provider_eh.publishing.document import ProducerState, StateKey
from airflow_provider_eh.publishing.driver import Progress, SendOutcome, carry_progress, drive, rank_errors
from airflow_provider_eh.publishing.fingerprint import Fingerprint
from airflow_provider_eh.publishing.in_doubt import InDoubt
from airflow_provider_eh.publishing.in_flight import DEFAULT_LEASE_ONLY_BATCH_BYTES, check_lease_only_batch_bytes
from airflow_provider_eh.publishing.landed import partition_end
from airflow_provider_eh.publishing.plan import PartitionOptions, PartitionPlan, PartitionResult, producer_group_of
from airflow_provider_eh.publishing.planner import PartitionPlanner
from airflow_provider_eh.publishing.records import CommittedBatch
from airflow_provider_eh.publishing.rulebook import OutgoingEvent, normalise
from airflow_provider_eh.publishing.sender import SendReport, send_partition
from airflow_provider_eh.publishing.session import PartitionSession
from airflow_provider_eh.publishing.state import ProducerStateStore
from airflow_provider_eh.stamps import batch_stamp
from airflow_provider_eh.steps import reached

log = logging.getLogger(__name__)


class IdempotentPublisher:
    """
    Exactly-once publishing of batches to the partitions of one hub.

    :param endpoint: the hub.
    :param store: where producer states live (blob or Variables backend).
    :param producer_group: the default producer group.
    :param partition_options: per-partition overrides (group, owner level, starting sequence number).
    :param max_workers: partitions processed at once; defaults to the number of partitions touched.
    :param send_attempts: in-process attempts per partition when a send fails with a transient SDK error
        (connection lost, timeout, server busy); each new attempt recovers by read-back first, exactly
        like an Airflow retry would.
    :param send_timeout: seconds one SDK batch may take.
    :param keep_committed: prune the ledger to this many most recent committed batches per partition
        (``None``, the default, keeps every batch: a re-run years later stays a no-op).
    :param keep_committed_days: also prune committed batches older than this many days (the newest batch
        of a partition is always kept). A pruned batch is forgotten: re-running it publishes it again.
    :param origin: who publishes (a JSON object, e.g. the Airflow task instance's ids), recorded with
        every batch of the ledger this publisher writes.
    :param hub_fencing: ``"auto"`` (default): attach every sender link as an idempotent producer (owner
        level = the ledger's) where the hub and the installed SDK offer it, so that the hub refuses a
        stalled publisher's late sends once another one claimed the partition; ``"required"``: raise
        :class:`~airflow_provider_eh.errors.HubFencingUnavailableError` before the intent where they do
        not; ``False``: the claim's deadline alone fences.
    :param content_type: a typed batch's content type (``avro/binary+<schema id>``, what Microsoft's encoders
        write): set on every event and covered by the fingerprint (:mod:`~airflow_provider_eh.publishing.typed`).
    :param schema: a typed batch's schema ``{group, name, id, version, format}``, recorded in each committed
        batch of the ledger and in each partition's result.
    :param lease_only_batch_bytes: where a send is fenced by the claim's deadline alone (``hub_fencing=False``,
        or ``"auto"`` where the hub or the SDK cannot fence), each SDK batch holds at most this many bytes
        (1 KiB to 1 MiB; default 256 KiB): what a publisher that stalls mid-send can land twice per
        partition after another one took over. An event larger than it is sent alone. Under the hub's
        fencing it does not apply (:mod:`~airflow_provider_eh.publishing.in_flight`).
    """

    def __init__(
        self,
        endpoint: EventHubsEndpoint,
        store: ProducerStateStore,
        *,
        producer_group: str,
        partition_options: Mapping[str, PartitionOptions] | None = None,
        max_workers: int | None = None,
        keep_committed: int | None = None,
        keep_committed_days: float | None = None,
        send_attempts: int = 3,
        send_timeout: float = 60.0,
        origin: Mapping[str, Any] | None = None,
        hub_fencing: HubFencing = "auto",
        lease_only_batch_bytes: int = DEFAULT_LEASE_ONLY_BATCH_BYTES,
        content_type: str | None = None,
        schema: Mapping[str, Any] | None = None,
    ):
        self.endpoint = endpoint
        self.content_type = content_type
        self.schema = dict(schema) if schema else None
        self.hub_fencing = fencing_mode(hub_fencing)
        self.lease_only_batch_bytes = check_lease_only_batch_bytes(lease_only_batch_bytes)
        self.store = store
        self.producer_group = producer_group
        self.partition_options = {str(k): v for k, v in (partition_options or {}).items()}
        self.max_workers = max_workers
        if keep_committed is not None and keep_committed < 1:
            raise ValueError(f"keep_committed={keep_committed!r}: keep at least 1 committed batch per partition, or None")
        if keep_committed_days is not None and not keep_committed_days > 0:
            raise ValueError(f"keep_committed_days={keep_committed_days!r}: a number of days above 0, or None")
        self.keep_committed = keep_committed
        self.keep_committed_days = keep_committed_days
        self.send_attempts = max(1, send_attempts)
        self.send_timeout = send_timeout
        self.origin = dict(origin) if origin else None
        self._in_doubt = InDoubt(endpoint, store, hub_fencing=self.hub_fencing, send_timeout=send_timeout,
                                 producer=self._producer)
        self._planner = PartitionPlanner(store, self._in_doubt, hub_fencing=self.hub_fencing,
                                         lease_only_batch_bytes=self.lease_only_batch_bytes,
                                         content_type=content_type, origin=self.origin,
                                         partition_end=self._partition_end)

    # ---- helpers -------------------------------------------------------------------------------

    def _group(self, partition_id: str) -> str:
        return producer_group_of(self.partition_options, partition_id, self.producer_group)

    def _producer(self, **kwargs: Any) -> Any:
        """A producer client of the hub, on the process's one connection to it (kept open by :meth:`publish`)."""
        return self.endpoint.producer(**kwargs)

    def _key(self, partition_id: str) -> StateKey:
        return StateKey.of(self.endpoint, self._group(partition_id), partition_id)

    def _partition_end(self, partition_id: str, producer: Any = None) -> int:
        if producer is not None:
            return partition_end(producer, partition_id)
        with self._producer() as client:
            return partition_end(client, partition_id)

    def partition_ids(self) -> list[str]:
        """The hub's partition ids; a failure is the error map's (``client.failures``): an unknown hub or a
        refused credential is not retried, an address that does not answer is."""
        try:
            with self._producer(retry_total=1) as client:
                return [str(p) for p in client.get_partition_ids()]
        except Exception as exc:
            mapped = provider_error(exc, site_of(self.endpoint, done=NOTHING_SENT))
            if mapped is None:
                raise
            raise mapped from exc

    def checked_partition_ids(self) -> list[str]:
        """The hub's partition ids, after checking that ``partition_options`` names only those."""
        partition_ids = self.partition_ids()
        check_partition_ids(self.endpoint.eventhub_name, self.partition_options, partition_ids, fix="partition_options")
        return partition_ids

    def get_partition_publishing_properties(self, partition_id: str) -> dict[str, Any]:
        """``{partition_id, idempotent, producer_group, owner_level, last_published_sequence_number}`` from the store."""
        key = self._key(str(partition_id))
        state = self.store.read(key) or ProducerState.new(key)
        return {
            "partition_id": key.partition,
            "idempotent": True,
            "producer_group": key.group,
            "owner_level": state.owner_level,
            "last_published_sequence_number": state.last_published_seq,
        }

    def committed_results(self, batch_id: str) -> dict[str, PartitionResult]:
        """Per partition of the hub that committed ``batch_id``, its recorded result (read from the ledger, no claim).

        What an Airflow task waits for when the batch was published elsewhere (a Spark job writing with the
        data source): the service sequence numbers to hand to the checkpoint sensor.
        """
        out: dict[str, PartitionResult] = {}
        for pid in self.partition_ids():
            key = self._key(pid)
            state = self.store.read(key)
            if state is None:
                continue
            last = state.ledger.last
            done = last if last is not None and last.batch_id == batch_id else self.store.find_committed(key, batch_id)
            if done is not None:
                out[pid] = PartitionResult(pid, done.events, done.first_seq, done.last_seq,
                                           done.service_last_sequence_number, "already_committed",
                                           fencing=done.fencing or "", lease_only_batch_bytes=done.lease_only_batch_bytes,
                                           schema=done.schema)
        return out

    # ---- driver side: begin --------------------------------------------------------------------

    def begin(
        self, partition_id: str, batch_id: str, event_count: int, fingerprint: str, *, producer: Any = None
    ) -> PartitionSession:
        """
        Claim the partition, settle the ledger and write the intent; returns a session whose ``plan`` says
        what to send. The claim (lease) is held until ``commit`` or ``abort``.

        :param producer: an open producer client to reuse for partition properties (optional).
        """
        partition_id = str(partition_id)
        key = self._key(partition_id)
        opts = self.partition_options.get(partition_id) or PartitionOptions()
        claim = self.store.claim(key, owner_level=opts.owner_level, starting_sequence_number=opts.starting_sequence_number)
        try:
            reached("after_claim")
            plan = self._planner.plan(key, claim, batch_id, event_count, fingerprint, producer)
        except BaseException:
            self.store.release(claim)
            raise
        return PartitionSession(key, claim, plan)

    # ---- driver side: commit -------------------------------------------------------------------

    def commit(self, session: PartitionSession, report: SendReport | None, *, producer: Any = None) -> PartitionResult:
        """
        Record the sent batch as committed (CAS) and release the claim. ``report`` is the sender's; it
        may be None only for plans that send nothing.
        """
        plan, claim, key = session.plan, session.claim, session.key
        try:
            if plan.action == "done":
                assert plan.result is not None
                return plan.result
            if plan.send_count and report is None:
                raise ValueError(f"{key}: batch {plan.batch_stamp} has {plan.send_count} events to send and no send report")
            if report is not None:
                if report.fingerprint != plan.fingerprint or report.event_count != plan.event_count:
                    raise BatchContentChangedError(
                        f"{key}: batch {plan.batch_stamp}: the sender saw {report.event_count} events of fingerprint "
                        f"{report.fingerprint[:16]}, the plan was made for {plan.event_count} of {plan.fingerprint[:16]}. "
                        "The partition's content is not deterministic (order rows by a declared key). The intent stays "
                        "pending; a retry with the planned content recovers, otherwise bump `generation`."
                    )
                if report.sent != plan.send_count:
                    raise ValueError(f"{key}: batch {plan.batch_stamp}: sent {report.sent} of {plan.send_count} planned events")
            service_last = (report.service_last_sequence_number if report is not None
                            else self._partition_end(key.partition, producer))
            state = claim.state
            last_seq = plan.first_seq + plan.send_count - 1
            if plan.send_count == 0:
                last_seq = max(state.last_published_seq, plan.first_seq - 1)
            first_seq = plan.first_seq if state.pending is None else state.pending.first_of_batch
            fencing = report.fencing if report is not None and plan.send_count else ""
            bound = report.lease_only_batch_bytes if report is not None and plan.send_count else None
            record = CommittedBatch(
                events=plan.event_count, first_seq=first_seq, last_seq=last_seq,
                service_last_sequence_number=service_last, fingerprint=plan.fingerprint,
                owner_level=plan.owner_level, committed_at=datetime.now(UTC).isoformat(),
                origin=self.origin if state.pending is None else state.pending.origin, fencing=fencing or None,
                batch_id=plan.batch_id, ordinal=state.ledger.next, lease_only_batch_bytes=bound, schema=self.schema,
            )
            self.store.record_committed(claim, record)
            reached("after_commit_records")
            state.count_committed(record)
            self._prune(claim, state)
            self._write_commit(claim, state, plan)
            reached("during_commit")
            status = "recovered" if plan.recovered_from else "published"
            log.info(
                "group %s partition %s batch %s: committed %d events (seq %d..%d, service seq up to %d)%s",
                key.group, key.partition, plan.batch_stamp, plan.event_count, first_seq, last_seq, service_last,
                f"; recovery: {plan.landed_count} had landed, {plan.send_count} resent" if plan.recovered_from else "",
            )
            return PartitionResult(key.partition, plan.event_count, first_seq, last_seq, service_last, status,
                                   landed_count=plan.landed_count, resent=plan.send_count if plan.recovered_from else 0,
                                   fencing=fencing, lease_only_batch_bytes=bound, readback_seconds=plan.readback_seconds,
                                   schema=self.schema)
        finally:
            self.store.release(claim)

    def _write_commit(self, claim: StateClaim, state: ProducerState, plan: PartitionPlan) -> None:
        try:
            self.store.write(claim, state)
        except EventHubsProviderError:
            raise
        except Exception as exc:  # outcome unknown: re-read and see whether the commit landed
            log.warning("%s: commit of batch %s: %s; re-reading the state", claim.key, plan.batch_stamp, exc)
            stored = self.store.read(claim.key)
            if stored is None or stored.ledger.last is None or stored.ledger.last.batch_id != plan.batch_id:
                raise

    def _prune(self, claim: StateClaim, state: ProducerState) -> None:
        """Apply ``keep_committed`` and ``keep_committed_days`` to the ledger (records deleted before the state moves)."""
        if self.keep_committed is None and self.keep_committed_days is None:
            return
        older_than = (None if self.keep_committed_days is None
                      else datetime.now(UTC) - timedelta(days=self.keep_committed_days))
        pruned = self.store.prune(claim, state, keep_last=self.keep_committed, older_than=older_than)
        if pruned:
            log.info("group %s partition %s: pruned %d old committed batches from the ledger (%d kept)",
                     claim.key.group, claim.key.partition, pruned, state.ledger.count)

    def abort(self, session: PartitionSession) -> None:
        """Release the claim without committing; a pending intent stays for recovery."""
        self.store.release(session.claim)

    # ---- the convenient whole ------------------------------------------------------------------

    def prepare(self, events: Iterable[Any], default_partition: str | None = None) -> dict[str, list[OutgoingEvent]]:
        """Normalise and validate every event, grouped by partition (indexes per partition, in input order)."""
        partition_ids = self.checked_partition_ids()
        grouped: dict[str, list[OutgoingEvent]] = {}
        for index, raw in enumerate(events):
            pid, event = normalise(raw, index, partition_ids, default_partition)
            grouped.setdefault(pid, []).append(event)
        return grouped

    def publish_partition(self, partition_id: str, batch_id: str, events: Sequence[OutgoingEvent]) -> PartitionResult:
        """The whole protocol for one partition (events in order; their position is their batch index)."""
        fp = Fingerprint(self.content_type)
        for event in events:
            fp.update(event.body, event.properties)
        count, fingerprint = fp.count, fp.hexdigest()

        def send(sessions: Mapping[str, PartitionSession], producer: Any) -> dict[str, SendOutcome]:
            out: dict[str, SendOutcome] = {}
            for pid, session in sessions.items():
                try:
                    report = send_partition(self.endpoint, session.plan, events, producer=producer,
                                            stop_check=session.check, send_timeout=self.send_timeout,
                                            fingerprint=fingerprint)
                except Exception as exc:
                    out[pid] = SendOutcome.failed(pid, exc, keep=True)
                else:
                    out[pid] = SendOutcome.sent(pid, report)
            return out

        with held(self.endpoint):  # one connection for the claim's partition ends, the send and any read-back
            results = drive(self, batch_id, {partition_id: (count, fingerprint)}, send, attempts=self.send_attempts,
                            producer_factory=lambda: self._producer(retry_total=0))
        return results[partition_id]

    def publish(
        self, events: Iterable[Any], *, batch_id: str, default_partition: str | None = None
    ) -> dict[str, PartitionResult]:
        """
        Publish ``events`` exactly once as batch ``batch_id``; returns per partition its result.

        Every event is validated before any partition is claimed. Partitions run concurrently and
        independently: one failing does not undo another's commit; the first error is raised after
        all partitions finished (non-retryable errors first).
        """
        # one connection to the hub for the hub's metadata, partition ends, fences, sends and read-back
        with held(self.endpoint):
            return self.publish_grouped(self.prepare(events, default_partition), batch_id=batch_id)

    def publish_grouped(
        self, grouped: Mapping[str, Sequence[OutgoingEvent]], *, batch_id: str
    ) -> dict[str, PartitionResult]:
        """
        Publish events already checked and grouped by partition (each partition's in its batch order) exactly
        once as batch ``batch_id``; what :meth:`publish` does after :meth:`prepare`.
        """
        started = time.monotonic()
        results: dict[str, PartitionResult] = {}
        errors: list[tuple[str, BaseException]] = []
        with held(self.endpoint):
            workers = self.max_workers or max(1, len(grouped))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="eh-publish") as pool:
                # each partition's thread runs in the task's context: its failures name the task's connection
                futures = {pid: pool.submit(contextvars.copy_context().run, self.publish_partition, pid, batch_id, evs)
                           for pid, evs in sorted(grouped.items())}
                for pid, future in futures.items():
                    try:
                        results[pid] = future.result()
                    except BaseException as exc:  # collected; raised below
                        log.error("group %s partition %s batch %s: %s: %s", self._group(pid), pid, batch_stamp(batch_id),
                                  type(exc).__name__, exc)
                        errors.append((pid, exc))
        if errors:  # the error says which partitions committed (each partition's drive knew only its own)
            raise carry_progress(rank_errors(errors)[0][1], Progress.of(grouped, results), replace=True)
        total = sum(r.events for r in results.values())
        log.info("group %s batch %s: %d partitions, %d events done in %.2fs",
                 self.producer_group, batch_stamp(batch_id), len(results), total, time.monotonic() - started)
        return results

