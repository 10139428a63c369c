"""Dead letters of a Delta sink applied again, each once even when a replay is killed and run again (no Airflow import).

The dead letters are in one Delta table and the rows in another, and no commit spans two tables; so a replay
is three commits, in an order that lets a rerun tell what landed:

1. **intent**, in the dead-letter table: the letters whose rows the row function now gives are marked
   ``replaying`` with the replay's version R; the letters it fails again stay ``dead`` with the new error
   and one more attempt;
2. **rows**, in the data table: their rows in one commit carrying the application transaction
   ``eventhubs/<namespace>/<hub>/<consumer group>/replay`` at version R (appended, or merged on the keys, as
   the ingestion writes);
3. **done**, in the dead-letter table: those letters become ``replayed``.

A replay that finds a letter ``replaying`` at R' reads that application transaction: at R' or beyond, the
letter's rows are in the table (the rows' commit happened) and it only marks the letter ``replayed``; below
R', they never landed and the letter is applied again. R is one more than both the transaction's version and
every R' of the dead-letter table, so versions only move forward. Two replays at once: delta-rs refuses a
rows' commit when one that landed after its snapshot carries the same app id, and the version is compared
again just before the commit; the loser writes no rows and fails (:class:`~airflow_provider_eh.errors.ReplayRaceError`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from airflow_provider_eh.errors import DeadLetterNotFoundError, ReplayRaceError
from airflow_provider_eh.ingest.events import IngestEvent
from airflow_provider_eh.ingest.processor import BatchProcessor
from airflow_provider_eh.ingest.sinks.contract import utc_text
from airflow_provider_eh.ingest.sinks.delta import (
    DEAD,
    REPLAYED,
    REPLAYING,
    DeltaIngestStore,
    DeltaTransaction,
    dead_letter_schema,
    open_table,
)
from airflow_provider_eh.steps import reached

log = logging.getLogger(__name__)

CHUNK = 5000  # letters per replay (three commits): a table refused many tiny commits
_MERGE_TRIES = 5  # a dead-letter table's merge refused by a concurrent commit (an ingest run's letters) is retried
_KEY = ("namespace", "eventhub", "consumer_group", "partition_id", "sequence_number")


class _ReplayTransaction(DeltaTransaction):
    """What :meth:`BatchProcessor.replay` does to each letter, gathered for the three commits."""

    def __init__(self, store: DeltaIngestStore):
        super().__init__(store)
        self.replayed: list[tuple[str, int]] = []
        self.failed: dict[tuple[str, int], str] = {}

    def mark_replayed(self, event: IngestEvent) -> None:
        self.replayed.append((event.partition_id, int(event.sequence_number)))

    def dead_letter(self, event: IngestEvent, reason: str, error: str) -> None:
        self.failed[(event.partition_id, int(event.sequence_number))] = error


def replay_app_id(store: DeltaIngestStore) -> str:
    """The application transaction of the data table that says which replay's rows landed last."""
    return "eventhubs/" + "/".join(store.stream.key) + "/replay"


def replay_delta_dead_letters(
    store: DeltaIngestStore,
    processor: BatchProcessor,
    *,
    partition_id: str | None = None,
    sequence_numbers: Iterable[int] | None = None,
    reasons: Iterable[str] | None = None,
) -> dict[str, Any]:
    """
    Apply the stream's dead letters (``dead``, or ``replaying`` from a replay that did not finish) again.

    :param store: the Delta sink: its data table and dead-letter table.
    :param processor: the row function (fixed, presumably).
    :param partition_id: only this partition's dead letters.
    :param sequence_numbers: only these (with ``partition_id``); a missing one is an error.
    :param reasons: only dead letters with these reasons.
    :return: ``{replayed: [[partition, seq], ...], failed: [[partition, seq, error], ...]}``, as the SQL replay;
        a letter whose rows an interrupted replay had committed counts as replayed.
    """
    wanted = None if sequence_numbers is None else {int(s) for s in sequence_numbers}
    wanted_reasons = set(reasons) if reasons else None
    stored = store.dead_letters()
    # above every version a replay of this stream ever put on a letter, so that versions only move forward
    newest = max((r["replay_version"] for r in stored if r["replay_version"] is not None), default=-1)
    letters = [
        r for r in stored
        if r["status"] in (DEAD, REPLAYING)
        and (partition_id is None or r["partition_id"] == str(partition_id))
        and (wanted is None or r["sequence_number"] in wanted)
    ]
    if wanted is not None:
        missing = wanted - {r["sequence_number"] for r in letters}
        if missing:
            raise DeadLetterNotFoundError(
                f"No dead letter to replay at sequence number(s) {sorted(missing)} of partition {partition_id!r} in "
                f"{'/'.join(store.stream.key)} (Delta table {store.target.dead_letter_uri!r}); list them with "
                "`python -m airflow_provider_eh.ingest --delta <table> ... list`."
            )
    if wanted_reasons is not None:
        letters = [r for r in letters if r["reason"] in wanted_reasons]
    replayed: list[list[Any]] = []
    failed: list[list[Any]] = []
    for number, chunk in enumerate(_chunks(letters, CHUNK), 1):
        done, errors = _replay_chunk(store, processor, chunk, newest, number)
        replayed += [[p, s] for p, s in done]
        failed += [[p, s, e] for (p, s), e in errors.items()]
    for p, s, e in failed:
        log.warning("Dead letter partition %s seq %d failed again: %s", p, s, e)
    log.info("Replayed %d dead letters into %s; %d failed again", len(replayed), store.target.uri, len(failed))
    return {"replayed": sorted(replayed), "failed": sorted(failed)}


def _chunks(letters: Sequence[dict[str, Any]], size: int) -> Iterator[Sequence[dict[str, Any]]]:
    for start in range(0, len(letters), size):
        yield letters[start:start + size]


def _replay_chunk(
    store: DeltaIngestStore, processor: BatchProcessor, letters: Sequence[dict[str, Any]], newest: int, number: int
) -> tuple[list[tuple[str, int]], dict[tuple[str, int], str]]:
    """One replay of ``letters`` (the ``number``-th of this call): the three commits; what was replayed, what failed."""
    store.refresh()
    app_id = replay_app_id(store)
    landed = store.txn_version(app_id)
    applied = -1 if landed is None else landed
    # a replay killed after its rows' commit: its letters are only marked
    finished = [r for r in letters if r["status"] == REPLAYING and r["replay_version"] is not None
                and r["replay_version"] <= applied]
    completed = [(r["partition_id"], r["sequence_number"]) for r in finished]
    done = set(completed)
    again = [r for r in letters if (r["partition_id"], r["sequence_number"]) not in done]
    if finished:
        _mark(store, finished, {"status": REPLAYED, "replayed_at": utc_text(datetime.now(UTC))})
    if not again:
        return completed, {}

    tx: Any = _ReplayTransaction(store)  # a Transaction to the processor, by the methods it calls
    for letter in again:
        processor.replay(tx, _event(letter))
    version = max(applied, newest) + 1
    succeeded = set(tx.replayed)
    _write_intent(store, again, succeeded, tx.failed, version)
    reached("replay_intent", number, {"version": version, "letters": len(succeeded)})
    if not succeeded:
        return completed, tx.failed

    _commit_rows(store, tx, app_id, landed, version, len(succeeded))
    reached("replay_committed", number, {"version": version, "letters": len(succeeded)})
    marked = [r for r in again if (r["partition_id"], r["sequence_number"]) in succeeded]
    _mark(store, marked, {"status": REPLAYED, "replayed_at": utc_text(datetime.now(UTC))})
    return completed + sorted(succeeded), tx.failed


def _write_intent(store: DeltaIngestStore, letters: Sequence[dict[str, Any]], succeeded: set[tuple[str, int]],
                  failed: dict[tuple[str, int], str], version: int) -> None:
    """The first commit: the letters replayed are ``replaying`` at ``version``; the others stay dead, one attempt
    more, with their new error."""
    now = utc_text(datetime.now(UTC))
    intent = [
        {**_key(r), "status": REPLAYING, "replay_version": version, "bump": 0, "error": None, "reason": None,
         "failed_at": None}
        if (r["partition_id"], r["sequence_number"]) in succeeded else
        {**_key(r), "status": DEAD, "replay_version": None, "bump": 1, "reason": "rejected", "failed_at": now,
         "error": failed.get((r["partition_id"], r["sequence_number"]), "")[:4000]}
        for r in letters
    ]
    _merge(store, intent, {
        "status": "s.status", "replay_version": "s.replay_version", "attempts": "t.attempts + s.bump",
        "error": "coalesce(s.error, t.error)", "reason": "coalesce(s.reason, t.reason)",
        "failed_at": "coalesce(s.failed_at, t.failed_at)",
    })


def _commit_rows(store: DeltaIngestStore, tx: _ReplayTransaction, app_id: str, landed: int | None, version: int,
                 count: int) -> None:
    """The second commit: the replayed letters' rows, under the application transaction ``app_id`` at ``version``;
    :class:`ReplayRaceError` when another replay committed rows since this one read ``landed``."""
    from deltalake import CommitProperties, Transaction
    from deltalake.exceptions import CommitFailedError

    store.refresh()
    if store.txn_version(app_id) != landed:
        raise ReplayRaceError(
            f"Another replay of {'/'.join(store.stream.key)} committed rows to the Delta table {store.target.uri!r} "
            "while this one prepared its own; this replay wrote no rows. Run it again: the letters that one "
            "replayed are skipped."
        )
    properties = CommitProperties(app_transactions=[Transaction(app_id, version)])
    try:
        store.write(tx.rows, tx.tables, properties, f"the replay of {count} dead letters")
    except CommitFailedError as exc:
        raise ReplayRaceError(
            f"Another replay of {'/'.join(store.stream.key)} committed rows to the Delta table {store.target.uri!r} "
            f"at the same time; this replay wrote no rows ({exc}). Run it again."
        ) from exc


def _event(letter: dict[str, Any]) -> IngestEvent:
    return IngestEvent.from_stored(
        partition_id=letter["partition_id"], sequence_number=letter["sequence_number"], offset=letter["event_offset"],
        enqueued_time=letter["enqueued_time"], body_base64=letter["body_base64"],
        properties_json=letter["properties_json"],
    )


def _key(letter: dict[str, Any]) -> dict[str, Any]:
    return {k: letter[k] for k in _KEY}


def _mark(store: DeltaIngestStore, letters: Sequence[dict[str, Any]], values: dict[str, Any]) -> None:
    """Set ``values`` (literal values) on ``letters`` in the dead-letter table."""
    _merge(store, [{**_key(r), **values} for r in letters], {c: f"s.{c}" for c in values})


def _merge(store: DeltaIngestStore, source: list[dict[str, Any]], updates: dict[str, str]) -> None:
    """Update the dead-letter table's rows of ``source`` (matched on the stream and position) as ``updates`` say;
    retried when a concurrent commit (an ingest run adding letters) made delta-rs refuse it."""
    import pyarrow as pa
    from deltalake.exceptions import CommitFailedError

    schema = dead_letter_schema()
    fields = [schema.field(c) for c in source[0] if c in schema.names] + (
        [pa.field("bump", pa.int64())] if "bump" in source[0] else [])
    data = pa.Table.from_pylist(source, schema=pa.schema(fields))
    predicate = " AND ".join(f"t.{c} = s.{c}" for c in _KEY)
    uri = store.target.dead_letter_uri or ""
    for attempt in range(_MERGE_TRIES):
        table = open_table(uri, store.target.storage_options)
        try:
            (table.merge(data, predicate, source_alias="s", target_alias="t")
             .when_matched_update(updates=updates).execute())
            return
        except CommitFailedError:
            if attempt == _MERGE_TRIES - 1:
                raise
