"""The driver's half of a data source write: publish the staged runs of one batch exactly once.

No Spark and no Airflow import. Spark calls the writer's ``commit`` on the driver with the commit
messages of the task attempts it kept, one per Spark partition: the staged runs (:class:`~.staging.StagedRun`)
are this batch's rows, whatever attempts, retries or speculative copies ran. :func:`publish_staged`
downloads them, puts each Event Hubs partition's events in batch order and runs the engine's protocol
per partition (:meth:`~airflow_provider_eh.publishing.IdempotentPublisher.publish_grouped`: claim,
ledger, intent, send, read-back on recovery, commit), from the driver, so that one process holds each
partition's claim and sends under it. Nothing here reaches an Airflow worker: the ledger and the claims
are in the blob container, the fencing is the hub's.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher, PartitionResult
from airflow_provider_eh.spark.datasource.commit_processes import (
    commit_processes,
    partition_groups,
    publish_in_processes,
    run_child,
)
from airflow_provider_eh.spark.datasource.options import WriteOptions
from airflow_provider_eh.spark.datasource.staging import (
    StagedBatch,
    StagedRun,
    remove_staged,
    staged_counts,
    staging_prefix,
)
from airflow_provider_eh.stamps import batch_stamp

log = logging.getLogger(__name__)


def publisher_of(options: WriteOptions, container: Any, *, origin: Mapping[str, Any] | None = None) -> IdempotentPublisher:
    """The engine's publisher for the write's hub, group and settings, its state in ``container``."""
    store = BlobProducerStateStore(container, lease_seconds=options.lease_seconds, claim_timeout=options.claim_timeout)
    return IdempotentPublisher(
        options.endpoint, store, producer_group=options.producer_group, hub_fencing=options.hub_fencing,  # type: ignore[arg-type]
        lease_only_batch_bytes=options.lease_only_batch_bytes, send_timeout=options.send_timeout,
        send_attempts=options.send_attempts, keep_committed=options.keep_committed, max_workers=options.max_workers,
        origin=origin, content_type=options.mapping.content_type,
    )


def publish_staged(options: WriteOptions, runs: Sequence[StagedRun], batch_id: str, *, staging: str | None = None,
                   origin: Mapping[str, Any] | None = None) -> dict[str, PartitionResult]:
    """Publish the batch that ``runs`` hold exactly once; per Event Hubs partition its result.

    A batch already committed publishes nothing and returns the recorded results (after checking that its
    content is the same); one left in doubt by a crashed or stalled attempt is recovered by reading the
    partition back. The partitions are published from this process or, for a large batch, from several
    (:mod:`~.commit_processes`), each partition from one. The staging folder (``staging``, default: the
    batch's own) is emptied once every partition committed.
    """
    started = time.monotonic()
    group, stamp = options.producer_group, batch_stamp(batch_id)
    rows = sum(r.rows for r in runs)
    prefix = staging or staging_prefix(options.endpoint, group, batch_id)
    if rows == 0:
        log.info("group %s batch %s (%s): no rows; nothing to publish", group, stamp, options.identity)
        remove_staged(options.blob, prefix)
        return {}
    counts = staged_counts(runs)
    processes = commit_processes(options, counts)
    if processes > 1:
        groups = partition_groups(counts, processes)
        log.info("group %s batch %s (%s): %d rows for %d partitions, committed by %d processes (%s)", group, stamp,
                 options.identity, rows, len(counts), len(groups), "; ".join(", ".join(g) for g in groups))
        results = publish_in_processes(options, runs, batch_id, groups, origin=origin)
    else:
        results = publish_partitions(options, runs, batch_id, origin=origin)
    remove_staged(options.blob, prefix)
    log.info("group %s batch %s (%s): %d events in %d partitions committed in %.1fs", group, stamp, options.identity,
             sum(r.events for r in results.values()), len(results), time.monotonic() - started)
    return results


def publish_partitions(options: WriteOptions, runs: Sequence[StagedRun], batch_id: str, *,
                       origin: Mapping[str, Any] | None = None) -> dict[str, PartitionResult]:
    """Read back the staged ``runs`` and publish every partition they hold slices of, from this process; per
    partition its result. The staged runs stay (the caller removes them once every partition committed)."""
    started = time.monotonic()
    group, stamp = options.producer_group, batch_stamp(batch_id)
    with options.blob.container_client() as container, tempfile.TemporaryDirectory(prefix="eh-publish-") as folder:
        staged = StagedBatch(runs, options.blob, options.mapping, folder)
        log.info("group %s batch %s (%s): %d rows staged by %d Spark tasks for %d partitions (%s); read in %.1fs",
                 group, stamp, options.identity, sum(staged.counts.values()), len(staged.runs), len(staged.counts),
                 ", ".join(f"{p}: {n}" for p, n in sorted(staged.counts.items(), key=lambda i: (len(i[0]), i[0]))),
                 time.monotonic() - started)
        return publisher_of(options, container, origin=origin).publish_grouped(staged.grouped(), batch_id=batch_id)


def committed_results(options: WriteOptions, batch_id: str) -> dict[str, PartitionResult]:
    """The committed results of ``batch_id`` in the ledger, per partition that has it (what to wait for)."""
    with options.blob.container_client() as container:
        publisher = publisher_of(options, container)
        return publisher.committed_results(batch_id)


if __name__ == "__main__":  # a commit process (commit_processes.publish_in_processes)
    run_child(publish_partitions)
