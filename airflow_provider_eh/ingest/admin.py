"""What a person does to the stored state once a cause is fixed: replay dead letters, complete a session.

Both run through the same store and processor as ingestion, so a replayed event is written by the
same row function into the same table: on SQL in one transaction per event with its dead-letter row update,
on a Delta sink as :mod:`airflow_provider_eh.ingest.delta_replay` says.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from airflow_provider_eh.ingest.processor import BatchProcessor
from airflow_provider_eh.ingest.sinks.delta import DeltaIngestStore
from airflow_provider_eh.ingest.sinks.sql.store import SqlIngestStore

log = logging.getLogger(__name__)


def replay_dead_letters(
    store: SqlIngestStore | DeltaIngestStore,
    processor: BatchProcessor,
    *,
    partition_id: str | None = None,
    sequence_numbers: Iterable[int] | None = None,
    reasons: Iterable[str] | None = None,
) -> dict[str, Any]:
    """
    Apply dead letters again (status ``dead`` only: a replayed one is never applied twice).

    :param store: the stream's state.
    :param processor: the table and row function (fixed, presumably).
    :param partition_id: only this partition's dead letters.
    :param sequence_numbers: only these (with ``partition_id``); a missing one is an error.
    :param reasons: only dead letters with these reasons (``rejected``, ``row_rejected``, ``session_expired``, ...).
    :return: ``{replayed: [[partition, seq], ...], failed: [[partition, seq, error], ...]}``.
    """
    if isinstance(store, DeltaIngestStore):
        from airflow_provider_eh.ingest.delta_replay import replay_delta_dead_letters

        return replay_delta_dead_letters(store, processor, partition_id=partition_id, sequence_numbers=sequence_numbers,
                                         reasons=reasons)
    wanted_reasons = set(reasons) if reasons else None
    letters = store.dead_letters(status="dead", partition_id=partition_id, sequence_numbers=sequence_numbers)
    replayed: list[list[Any]] = []
    failed: list[list[Any]] = []
    for letter in letters:
        if wanted_reasons is not None and letter.reason not in wanted_reasons:
            continue
        event = letter.event
        with store.transaction() as tx:
            error = processor.replay(tx, event)
        if error is None:
            replayed.append([event.partition_id, event.sequence_number])
            log.info("Replayed dead letter: partition %s seq %d", event.partition_id, event.sequence_number)
        else:
            failed.append([event.partition_id, event.sequence_number, error])
            log.warning(
                "Dead letter partition %s seq %d failed again: %s", event.partition_id, event.sequence_number, error
            )
    return {"replayed": replayed, "failed": failed}


def complete_session(store: SqlIngestStore, session_key: str) -> dict[str, Any]:
    """
    Mark a session completed: its deferred events become dead letters (``session_completed``),
    and events of it that arrive later too.

    :return: ``{session_key, next_sequence, dead_lettered: [session sequences]}``.
    """
    with store.transaction() as tx:
        state = tx.session(session_key)
        next_sequence = state[0] if state else 0
        dead: list[int] = []
        for seq in tx.pending_in_session(session_key):
            event = tx.take_deferred(session_key, seq)
            if event is not None:
                tx.dead_letter(
                    event, "session_completed",
                    f"session {session_key!r} was completed by hand while sequence {seq} waited for {next_sequence}",
                )
                dead.append(seq)
        tx.save_session(session_key, next_sequence, True)
    log.info("Session %s completed at sequence %d; %d deferred events dead-lettered", session_key, next_sequence, len(dead))
    return {"session_key": session_key, "next_sequence": next_sequence, "dead_lettered": dead}
