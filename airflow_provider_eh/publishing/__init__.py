"""Exactly-once publishing to Event Hubs partitions (the protocol of ``docs/exactly-once.md``).

No Airflow import here. Two ways in:

**Whole batch** (operators): ::

    publisher = IdempotentPublisher(endpoint, store, producer_group="dag.task")
    results = publisher.publish(events, batch_id=derive_batch_id(...))   # {partition: PartitionResult}

**Split driver / executor** (Spark). The content of every partition's batch must be
deterministic (read materialised output, order rows by a declared key):

1. *executors*, pass 1: per partition, feed every event's ``(body bytes, properties)`` in order into a
   :class:`Fingerprint` (``update`` once per event; one pass over an iterator, nothing collected);
   return ``(partition_id, fp.count, fp.hexdigest())``.
2. *driver*: ``session = publisher.begin(partition_id, batch_id, count, fingerprint)`` per partition.
   This claims the partition (blob lease, renewed in the background while the session is open),
   settles the ledger (committed → nothing to do; own pending → read back what landed; another
   run's pending → resolved as partial) and writes the intent. ``session.plan`` is a picklable
   :class:`PartitionPlan`: ``plan.action == "done"`` (``plan.result`` is the recorded outcome) or
   ``"send"``: send the events whose indexes are in ``plan.indexes`` (``[start, stop)`` ranges;
   ``None`` = all), stamped from ``plan.first_seq`` upwards.
3. *executors*, pass 2: ``report = send_partition(endpoint, plan, rows_as_(body, properties))`` for each
   plan with ``send_count > 0``: no store access; it iterates ALL the partition's events in the same
   order (so it can recompute the fingerprint and skip the ones already landed) and returns a
   picklable :class:`SendReport` (events seen, fingerprint, sent, service's last sequence number).
4. *driver*: ``publisher.commit(session, report)`` (``report=None`` when nothing had to be sent)
   checks the report's fingerprint and count against the plan, commits with compare-and-swap and
   releases the claim; ``publisher.abort(session)`` on failure leaves the intent for recovery.

Both ways run the one driver loop of :mod:`.driver` (begin, send, commit, retry on transient
errors); the rules that turn an input into an event are :mod:`.rulebook`; the state document is
:mod:`.document`, the ledger's records :mod:`.records`, a claim's hold :mod:`.claim`, and the store
interface the two backends implement :mod:`.state`.

The endpoint (:class:`~airflow_provider_eh.client.endpoint.EventHubsEndpoint`) pickles; executors build
their own clients from it. Stamps (``eh.group``, ``eh.seq``, ``eh.batch``, ``eh.owner``) are named in
:mod:`airflow_provider_eh.stamps`, below both engines (ingestion reads them), and encoded by
:mod:`.wire`; the step boundaries crash tests observe are in :mod:`airflow_provider_eh.steps`.
"""

from __future__ import annotations

from airflow_provider_eh.publishing.batch_id import derive_batch_id
from airflow_provider_eh.publishing.blob_store import BlobProducerStateStore
from airflow_provider_eh.publishing.claim import StateClaim
from airflow_provider_eh.publishing.document import ProducerState, StateKey
from airflow_provider_eh.publishing.fingerprint import Fingerprint, fingerprint_of
from airflow_provider_eh.publishing.plan import PartitionOptions, PartitionPlan, PartitionResult
from airflow_provider_eh.publishing.publisher import IdempotentPublisher
from airflow_provider_eh.publishing.rulebook import (
    OutgoingEvent,
    encode_body,
    normalise,
    partition_for_key,
)
from airflow_provider_eh.publishing.sender import SendReport, send_partition
from airflow_provider_eh.publishing.session import PartitionSession
from airflow_provider_eh.publishing.state import ProducerStateStore
from airflow_provider_eh.publishing.variable_store import VariableProducerStateStore

__all__ = [
    "BlobProducerStateStore",
    "Fingerprint",
    "IdempotentPublisher",
    "OutgoingEvent",
    "PartitionOptions",
    "PartitionPlan",
    "PartitionResult",
    "PartitionSession",
    "ProducerState",
    "ProducerStateStore",
    "SendReport",
    "StateClaim",
    "StateKey",
    "VariableProducerStateStore",
    "derive_batch_id",
    "encode_body",
    "fingerprint_of",
    "normalise",
    "partition_for_key",
    "send_partition",
]
