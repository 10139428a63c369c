"""A downstream consumer as users run it: the SDK's EventHubConsumerClient with BlobCheckpointStore.

Run as a separate process by the checkpoint tests::

    python sdk_consumer.py EH_CONN_STR HUB CONSUMER_GROUP STORAGE_CONN_STR CONTAINER '{"0": 9, "1": 4}'

It checkpoints after every event whose sequence number is at most the limit of its partition,
ignores later events, and exits (closing the client, which releases ownership) once every
partition named in the limits has checkpointed its limit. ``-1`` as a limit means "checkpoint
nothing on that partition". Progress lines go to stdout.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from azure.eventhub import EventHubConsumerClient
from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore


def main() -> int:
    eh_conn_str, hub, group, storage_conn_str, container, limits_json = sys.argv[1:7]
    limits = {str(k): int(v) for k, v in json.loads(limits_json).items()}
    pending = {p for p, limit in limits.items() if limit >= 0}
    lock = threading.Lock()
    store = BlobCheckpointStore.from_connection_string(storage_conn_str, container)
    client = EventHubConsumerClient.from_connection_string(
        eh_conn_str,
        consumer_group=group,
        eventhub_name=hub,
        checkpoint_store=store,
        load_balancing_strategy="greedy",
        load_balancing_interval=1,
    )

    def on_event(context, event):  # type: ignore[no-untyped-def]
        if event is None:
            return
        partition = context.partition_id
        if event.sequence_number > limits.get(partition, -1):
            return
        context.update_checkpoint(event)
        print(f"{time.time():.2f} checkpoint {group} partition {partition} seq {event.sequence_number}", flush=True)
        with lock:
            if event.sequence_number >= limits[partition]:
                pending.discard(partition)
            if not pending:
                print(f"{time.time():.2f} closing", flush=True)
                threading.Thread(target=client.close, daemon=True).start()

    if not pending:
        return 0
    print(f"{time.time():.2f} start", flush=True)
    with client:
        client.receive(on_event=on_event, starting_position="-1", max_wait_time=1)
    print(f"{time.time():.2f} consumer done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
