"""A streaming query's progress written as a consumer group's checkpoints, in the layout every Azure SDK reads.

With ``checkpointContainer``, each commit of the query (Spark has written the micro-batch to its sink)
writes, for each partition that moved, the blob ``<namespace>/<hub>/<consumer group>/checkpoint/<partition>``
with the metadata ``sequencenumber`` (the last event the query processed) and ``offset`` (that event's
offset: what an SDK's processor starts after), as ``BlobCheckpointStore.update_checkpoint`` writes it
(:func:`~airflow_provider_eh.checkpoints.blob_layout.partition_blob`). The query itself never reads them back:
its offsets live in Spark's checkpoint. They are for the others: ``EventHubCheckpointSensor``, the Event
Hubs view, a processor taking the stream over.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from airflow_provider_eh.checkpoints.blob_layout import CHECKPOINT, partition_blob
from airflow_provider_eh.client.partition_readers import PartitionReader
from airflow_provider_eh.errors import CheckpointStoreError
from airflow_provider_eh.spark.datasource.read_options import ReadOptions

log = logging.getLogger(__name__)


def offset_of(options: ReadOptions, partition_id: str, sequence_number: int) -> str | None:
    """The offset of one event, received once (``None`` when it does not come within ``receiveTimeout``)."""
    reader = PartitionReader(options.endpoint, options.consumer_group, partition_id, sequence_number - 1,
                             max_batch_size=1, max_wait_time=min(5.0, options.receive_timeout), prefetch=1,
                             convert=lambda _p, fields: fields)
    try:
        for batch in reader.batches():
            if batch:
                return str(batch[0].offset) if batch[0].sequence_number == sequence_number else None
            return None
    finally:
        reader.close()
    return None


class CheckpointWriter:
    """
    Writes the consumer group's checkpoints of a query's committed offsets.

    :param options: the read's options (``checkpoints`` set).
    """

    def __init__(self, options: ReadOptions):
        assert options.checkpoints is not None
        self.options = options
        self.written: dict[str, int] = {}  # partition -> sequence number last written by this writer

    def write(self, end: Mapping[str, int], known_offsets: Mapping[str, tuple[int, str | None]]) -> dict[str, int]:
        """
        Write each partition's checkpoint at ``end`` (the next sequence numbers): the event before it.

        :param known_offsets: per partition, ``(sequence number, offset)`` of an event the driver already knows (the
            last enqueued when the offsets were planned): its offset is taken rather than received again.
        :return: what was written, partition to sequence number.
        """
        location = self.options.checkpoints
        assert location is not None
        endpoint = self.options.endpoint
        done: dict[str, int] = {}
        with location.container_client() as container:
            for p, following in sorted(end.items()):
                seq = int(following) - 1
                if seq < 0 or self.written.get(p) == seq:
                    continue
                known = known_offsets.get(p)
                offset = known[1] if known is not None and known[0] == seq else offset_of(self.options, p, seq)
                if offset is None:
                    log.warning("partition %s: the offset of sequence number %d was not found; its checkpoint is "
                                "left as it was", p, seq)
                    continue
                name = partition_blob(endpoint.fully_qualified_namespace, endpoint.eventhub_name,
                                      self.options.consumer_group, CHECKPOINT, p)
                try:
                    container.upload_blob(name, b"", overwrite=True,
                                          metadata={"sequencenumber": str(seq), "offset": offset})
                except Exception as exc:
                    raise CheckpointStoreError(
                        f"partition {p}: the consumer group checkpoint {name!r} could not be written in container "
                        f"{location.container!r} ({type(exc).__name__}); check option 'checkpointContainer' and its "
                        "credential") from exc
                self.written[p] = done[p] = seq
        if done:
            log.info("consumer group %s: checkpoints written: %s", self.options.consumer_group,
                     ", ".join(f"partition {p} at {s}" for p, s in done.items()))
        return done
