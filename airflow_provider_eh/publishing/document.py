"""The producer state document of one (namespace, hub, producer group, partition): owner level, sequence, ledger.

The state is a small *hot document* (same shape in every backend), read and written whole on the
claim, the intent and the commit, plus one small *record* per committed batch, written once when
the batch commits and never again (until pruning deletes it)::

    {"version": 2, "namespace": ..., "hub": ..., "group": ..., "partition": "0",
     "owner_level": 3, "claim_token": "...", "last_published_seq": 41,
     "ledger": Ledger,
     "pending": PendingIntent | null,
     "partial": {batch_id: PartialBatch}}

    Ledger:         {"next", "first", "last"}
    CommittedBatch: {"events", "first_seq", "last_seq", "service_last_sequence_number", "fingerprint"?,
                     "owner_level"?, "committed_at"?, "origin"?, "fencing"?, "batch_id"?, "ordinal"?,
                     "lease_only_batch_bytes"?, "schema"?}
    PendingIntent:  {"batch_id", "first_seq", "indexes", "events", "fingerprint", "owner_level",
                     "start_sequence_number", "landed", "batch_first_seq"?, "started_at"?, "origin"?}
    PartialBatch:   {"events", "fingerprint", "landed", "batch_first_seq"?, "origin"?, "started_at"?}
    origin:         {"dag_id", "task_id", "run_id", "map_index", "try_number"} (what published the batch;
                    any JSON object the caller passes, the Airflow operators pass these)
    schema:         {"group", "name", "id", "version", "format"} (a typed batch's schema in the Schema Registry)

(``?``: absent from documents written before the field existed; such documents load unchanged.)
The records are the dataclasses of :mod:`~airflow_provider_eh.publishing.records`, the only place
their JSON is written and read; a unit test checks this layout against them.

**Committed batches are records, not part of the document.** Every commit gets the next *ordinal*
(``ledger.next``, then one more) and is stored twice, each a few hundred bytes: under its batch id
(``batch`` records: the lookup "is this batch committed?", one read) and under its ordinal
(``history`` records: the ledger in commit order, paged for the view and pruned oldest first,
without listing anything). ``ledger.first`` is the oldest ordinal kept (pruning raises it) and
``ledger.last`` the newest committed batch. So what a publish reads and writes, and the largest
object stored, are the same on day one and after a million batches. Version 1 documents kept every
committed batch inside (``"committed": {batch_id: CommittedBatch}``): they load, and the first claim
moves their batches into records (ordinals in sequence-number order) before it writes version 2
(:meth:`~airflow_provider_eh.publishing.state.ProducerStateStore.claim`), so nothing committed is lost
and an upgrade needs no step.

``origin`` names who sent the batch (the intent's, carried into the committed or partial record), so
tools (the Event Hubs view) link a batch to its Airflow task instance; readers ignore fields they do
not know, so older versions read newer records too.

``indexes`` and ``landed`` are event-index sets stored as ``[[start, stop), ...]`` ranges, so a batch
of a million events costs a few bytes unless its sends were cut into pieces. ``landed`` maps
nothing to sequence numbers: every send attempt's indexes get consecutive fresh sequence numbers
starting at its ``first_seq``; ``indexes`` null means every event of the batch. ``batch_first_seq``
is the first sequence number ever assigned to the batch (its first attempt's ``first_seq``).

The store interface both backends implement (claim, compare-and-swap write, release, the records) is
:class:`~airflow_provider_eh.publishing.state.ProducerStateStore`; the exclusive hold a claim gives is
:class:`~airflow_provider_eh.publishing.claim.StateClaim`.
"""


from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_provider_eh.errors import InvalidProducerStateError
from airflow_provider_eh.publishing.records import CommittedBatch, Ledger, PartialBatch, PendingIntent

STATE_VERSION = 2
#: versions this provider reads: 1 (every committed batch inside the document) is migrated on its first claim
READABLE_VERSIONS = (1, 2)


@dataclass(frozen=True)
class StateKey:
    """Where one producer state lives."""

    namespace: str
    hub: str
    group: str
    partition: str

    @classmethod
    def of(cls, endpoint: Any, group: str, partition: str) -> StateKey:
        """The key of ``group``'s state of ``partition`` on ``endpoint``'s hub (an ``EventHubsEndpoint``): the
        namespace in its one spelling and the hub's name in lower case, as the service treats it."""
        return cls(endpoint.namespace, endpoint.eventhub_name.lower(), group, str(partition))

    @property
    def blob_name(self) -> str:
        return f"{self.namespace}/{self.hub}/{self.group}/producer-state/{self.partition}".lower()

    def record_blob_name(self, kind: str, name: str) -> str:
        """A ledger record's blob: under ``_ledger/``, apart from the state documents (which the view lists)."""
        return f"_ledger/{self.namespace}/{self.hub}/{self.group}/{self.partition}/{kind}/{name}".lower()

    def __str__(self) -> str:
        return f"group {self.group!r} partition {self.partition} of {self.namespace}/{self.hub}"


@dataclass
class ProducerState:
    """The decoded state document; see the module docstring for the fields."""

    namespace: str
    hub: str
    group: str
    partition: str
    owner_level: int = 0
    claim_token: str | None = None
    last_published_seq: int = -1
    ledger: Ledger = field(default_factory=Ledger)
    pending: PendingIntent | None = None
    partial: dict[str, PartialBatch] = field(default_factory=dict)
    #: the committed batches of a version 1 document, until its first claim moves them into records
    unmigrated: dict[str, CommittedBatch] = field(default_factory=dict)

    @property
    def committed_count(self) -> int:
        """Committed batches kept, in records or (not migrated yet) inside a version 1 document."""
        return self.ledger.count + len(self.unmigrated)

    @property
    def last_committed(self) -> CommittedBatch | None:
        """The newest committed batch (with its ``batch_id``), wherever it is kept."""
        if self.unmigrated:
            batch_id, record = max(self.unmigrated.items(), key=lambda item: (item[1].last_seq, item[0]))
            return replace(record, batch_id=batch_id)
        return self.ledger.last

    def count_committed(self, record: CommittedBatch, *sent_up_to: int) -> None:
        """Count a committed batch whose records are written: the ledger moves on to it, the intent is done,
        and the last published sequence number covers it (and ``sent_up_to``, what the intent assigned)."""
        self.ledger = self.ledger.added(record)
        self.pending = None
        self.last_published_seq = max(self.last_published_seq, record.last_seq, *sent_up_to)

    @classmethod
    def new(cls, key: StateKey) -> ProducerState:
        return cls(key.namespace.lower(), key.hub.lower(), key.group, key.partition)

    def to_json(self) -> str:
        if self.unmigrated:  # a version 1 document is only ever written back after its claim moved them
            raise RuntimeError(f"{len(self.unmigrated)} committed batches of a version 1 document are not in records yet")
        return json.dumps(
            {
                "version": STATE_VERSION,
                "namespace": self.namespace,
                "hub": self.hub,
                "group": self.group,
                "partition": self.partition,
                "owner_level": self.owner_level,
                "claim_token": self.claim_token,
                "last_published_seq": self.last_published_seq,
                "ledger": self.ledger.to_doc(),
                "pending": None if self.pending is None else self.pending.to_doc(),
                "partial": {b: r.to_doc() for b, r in self.partial.items()},
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes, key: StateKey, where: str, reset_hint: str) -> ProducerState:
        """Decode and check a stored document; anything unexpected is an InvalidProducerStateError."""

        def bad(why: str) -> InvalidProducerStateError:
            return InvalidProducerStateError(
                f"producer state {where} for {key}: {why}. The state cannot be trusted; to start over "
                f"{reset_hint} (and republish with a new producer group or generation if consumers dedupe on eh.seq)."
            )

        try:
            doc = json.loads(text)
        except (ValueError, UnicodeDecodeError):
            raise bad("is not JSON") from None
        if not isinstance(doc, dict):
            raise bad("is not a JSON object")
        if doc.get("version") not in READABLE_VERSIONS:
            raise bad(f"has version {doc.get('version')!r}, this provider reads versions "
                      f"{', '.join(map(str, READABLE_VERSIONS))} (was it written by a newer release?)")
        if (str(doc.get("namespace", "")).lower(), str(doc.get("hub", "")).lower()) != (
            key.namespace.lower(),
            key.hub.lower(),
        ):
            raise InvalidProducerStateError(
                f"producer state {where} for {key}: belongs to hub {doc.get('namespace')}/{doc.get('hub')}, not "
                f"{key.namespace}/{key.hub}. Nothing was sent. A producer group publishes to one hub: give this task "
                "its own producer_group (or state_container) for this hub; that state stays valid for its own hub, "
                "so do not delete it."
            )
        try:
            return cls(
                namespace=doc["namespace"],
                hub=doc["hub"],
                group=doc["group"],
                partition=str(doc["partition"]),
                owner_level=int(doc["owner_level"]),
                claim_token=doc.get("claim_token"),
                last_published_seq=int(doc["last_published_seq"]),
                ledger=Ledger() if doc["version"] == 1 else Ledger.from_doc(doc["ledger"]),
                pending=None if doc.get("pending") is None else PendingIntent.from_doc(doc["pending"]),
                partial={b: PartialBatch.from_doc(r) for b, r in (doc.get("partial") or {}).items()},
                unmigrated={} if doc["version"] != 1 else
                {b: CommittedBatch.from_doc(r) for b, r in (doc.get("committed") or {}).items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise bad(f"misses or mangles field {exc}") from None
