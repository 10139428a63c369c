"""The checkpoint reader reads what every SDK's BlobCheckpointStore writes, in one list call per consumer group.

Blobs are written to Azurite: by the SDK's own ``BlobCheckpointStore`` for the standard layout, and
directly for the variants other SDKs write (original-case paths, upper-case metadata keys,
placeholder offsets).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from azure.eventhub.extensions.checkpointstoreblob import BlobCheckpointStore
from azure.storage.blob import ContainerClient

from airflow_provider_eh.checkpoints.blob_layout import AsyncCheckpointReader, CheckpointReader
from airflow_provider_eh.errors import CheckpointStoreError

NAMESPACE = "ehns-test.servicebus.windows.net"
HUB = "Orders"  # hub names are case-insensitive; the SDKs lower-case them in blob paths


class RequestCounter:
    """A storage ``raw_request_hook``: records the method and URL of every HTTP request the client sends."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []

    def __call__(self, request) -> None:  # type: ignore[no-untyped-def]
        self.requests.append((request.http_request.method, request.http_request.url))


def _container(azurite: object, container: str, **kwargs: object) -> ContainerClient:
    return ContainerClient.from_connection_string(azurite.connection_string, container, **kwargs)  # type: ignore[attr-defined]


def _sdk_store(azurite: object, container: str) -> BlobCheckpointStore:
    return BlobCheckpointStore.from_connection_string(azurite.connection_string, container)  # type: ignore[attr-defined]


def _sdk_checkpoint(store: BlobCheckpointStore, group: str, partition: str, seq: int, offset: object = "0") -> None:
    store.update_checkpoint(
        {
            "fully_qualified_namespace": NAMESPACE,
            "eventhub_name": HUB,
            "consumer_group": group,
            "partition_id": partition,
            "sequence_number": seq,
            "offset": offset,
        }
    )


def _sdk_claim(store: BlobCheckpointStore, group: str, partition: str, owner: str) -> None:
    (claimed,) = store.claim_ownership(
        [
            {
                "fully_qualified_namespace": NAMESPACE,
                "eventhub_name": HUB,
                "consumer_group": group,
                "partition_id": partition,
                "owner_id": owner,
            }
        ]
    )
    assert claimed["owner_id"] == owner


def test_reads_checkpoints_and_ownership_written_by_the_sdks_blob_checkpoint_store(azurite: object, container: str) -> None:
    store = _sdk_store(azurite, container)
    for partition, seq in {"0": 41, "1": 7, "3": 0}.items():
        _sdk_checkpoint(store, "$Default", partition, seq, offset=str(seq * 100))
    _sdk_claim(store, "$Default", "0", "owner-a")
    _sdk_claim(store, "$Default", "1", "owner-b")

    state = CheckpointReader(_container(azurite, container), NAMESPACE, HUB).read("$Default")

    assert {p: c.sequence_number for p, c in state.checkpoints.items()} == {"0": 41, "1": 7, "3": 0}
    assert state.checkpoints["0"].offset == "4100"
    assert state.checkpoints["0"].blob_name == f"{NAMESPACE}/orders/$default/checkpoint/0"
    assert state.sequence_number("2") is None
    assert {p: o.owner_id for p, o in state.ownership.items()} == {"0": "owner-a", "1": "owner-b"}
    assert state.ownership["0"].last_modified is not None and state.ownership["0"].is_claimed
    # What the SDK itself reads back agrees.
    sdk = {c["partition_id"]: c["sequence_number"] for c in store.list_checkpoints(NAMESPACE, HUB, "$Default")}
    assert sdk == {p: c.sequence_number for p, c in state.checkpoints.items()}


def test_reads_original_case_paths_and_upper_case_metadata_keys(azurite: object, container: str) -> None:
    client = _container(azurite, container)
    client.upload_blob(
        f"{NAMESPACE}/{HUB}/Analytics/checkpoint/0", b"", metadata={"SequenceNumber": "12", "Offset": "1200"}
    )
    client.upload_blob(f"{NAMESPACE}/{HUB}/Analytics/Ownership/0", b"", metadata={"OwnerId": "go-processor-1"})
    client.upload_blob(f"{NAMESPACE}/orders/analytics/CHECKPOINT/1", b"", metadata={"SEQUENCENUMBER": "5"})

    state = CheckpointReader(client, NAMESPACE, HUB).read("Analytics")

    assert {p: c.sequence_number for p, c in state.checkpoints.items()} == {"0": 12, "1": 5}
    assert state.checkpoints["0"].offset == "1200"
    assert state.ownership["0"].owner_id == "go-processor-1"


@pytest.mark.parametrize("offset", ["", "None", "null", "-1", None])
def test_empty_or_placeholder_offsets_do_not_hide_the_sequence_number(
    azurite: object, container: str, offset: str | None
) -> None:
    client = _container(azurite, container)
    metadata = {"sequencenumber": "99"} if offset is None else {"sequencenumber": "99", "offset": offset}
    client.upload_blob(f"{NAMESPACE}/orders/$default/checkpoint/2", b"", metadata=metadata)

    checkpoint = CheckpointReader(client, NAMESPACE, HUB).read("$Default").checkpoints["2"]

    assert checkpoint.sequence_number == 99
    assert checkpoint.offset == ("-1" if offset == "-1" else None)


def test_a_checkpoint_without_a_usable_sequence_number_counts_as_none(azurite: object, container: str) -> None:
    client = _container(azurite, container)
    client.upload_blob(f"{NAMESPACE}/orders/$default/checkpoint/0", b"", metadata={"offset": "100"})
    client.upload_blob(f"{NAMESPACE}/orders/$default/checkpoint/1", b"", metadata={"sequencenumber": ""})

    state = CheckpointReader(client, NAMESPACE, HUB).read("$Default")

    assert state.sequence_number("0") is None and state.sequence_number("1") is None


def test_when_both_spellings_exist_the_most_recently_written_checkpoint_wins(azurite: object, container: str) -> None:
    client = _container(azurite, container)
    client.upload_blob(f"{NAMESPACE}/{HUB}/$Default/checkpoint/0", b"", metadata={"sequencenumber": "50"})
    time.sleep(1.1)  # blob last-modified has one-second resolution
    _sdk_checkpoint(_sdk_store(azurite, container), "$Default", "0", 20)

    assert CheckpointReader(client, NAMESPACE, HUB).read("$Default").sequence_number("0") == 20


def test_other_hubs_and_consumer_groups_under_the_same_prefix_are_not_mixed_in(azurite: object, container: str) -> None:
    store = _sdk_store(azurite, container)
    _sdk_checkpoint(store, "$Default", "0", 3)
    _sdk_checkpoint(store, "$Default2", "0", 300)
    _sdk_checkpoint(store, "$Default/x", "0", 301)  # nested: not a partition of $Default
    client = _container(azurite, container)
    client.upload_blob(f"{NAMESPACE}/orders-archive/$default/checkpoint/0", b"", metadata={"sequencenumber": "400"})

    state = CheckpointReader(client, NAMESPACE, HUB).read("$Default")

    assert {p: c.sequence_number for p, c in state.checkpoints.items()} == {"0": 3}


def test_a_consumer_group_without_checkpoints_reads_as_empty(azurite: object, container: str) -> None:
    state = CheckpointReader(_container(azurite, container), NAMESPACE, HUB).read("never-started")
    assert state.checkpoints == {} and state.ownership == {}
    assert state.prefix == f"{NAMESPACE}/orders/never-started/"


def test_a_missing_container_is_an_error_naming_container_and_consumer_group(azurite: object) -> None:
    reader = CheckpointReader(_container(azurite, "no-such-container"), NAMESPACE, HUB)
    with pytest.raises(CheckpointStoreError, match=r"container 'no-such-container' does not exist .*'analytics'.* Create it"):
        reader.read("analytics")


def test_one_read_is_one_list_request_per_consumer_group(azurite: object, container: str) -> None:
    store = _sdk_store(azurite, container)
    for group in ("$Default", "analytics"):
        for partition in "0123":
            _sdk_checkpoint(store, group, partition, int(partition))
            _sdk_claim(store, group, partition, f"{group}-owner")
    counter = RequestCounter()
    reader = CheckpointReader(_container(azurite, container, raw_request_hook=counter), NAMESPACE, HUB)

    states = [reader.read(group) for group in ("$Default", "analytics")]

    assert [len(s.checkpoints) + len(s.ownership) for s in states] == [8, 8]
    assert [method for method, _ in counter.requests] == ["GET", "GET"]
    assert all("comp=list" in url and "include=metadata" in url for _, url in counter.requests)


def test_every_group_of_a_hub_is_read_in_one_list_request_the_same_as_one_by_one(azurite: object, container: str) -> None:
    store = _sdk_store(azurite, container)
    groups = ["$Default", "analytics", "reporting"]
    for group in groups:
        for partition in "0123":
            _sdk_checkpoint(store, group, partition, int(partition) + len(group))
            _sdk_claim(store, group, partition, f"{group}-owner")
    _sdk_checkpoint(store, "other", "0", 1)  # a group of the hub not asked for below
    counter = RequestCounter()
    reader = CheckpointReader(_container(azurite, container, raw_request_hook=counter), NAMESPACE, HUB)

    found = reader.read_hub()
    assert len(counter.requests) == 1 and "comp=list" in counter.requests[0][1]  # one listing for four groups
    assert [s.consumer_group for s in found] == ["$default", "analytics", "other", "reporting"]
    one_by_one = {g.lower(): reader.read(g) for g in [*groups, "other"]}
    for state in found:
        alone = one_by_one[state.consumer_group.lower()]
        assert state.checkpoints == alone.checkpoints and state.ownership == alone.ownership

    named = reader.read_hub(["analytics", "ANALYTICS", "absent"])  # as named, each once, absent ones empty
    assert [(s.consumer_group, len(s.checkpoints)) for s in named] == [("analytics", 4), ("absent", 0)]


def test_async_reader_reads_the_same_in_one_list_request(azurite: object, container: str) -> None:
    from azure.storage.blob.aio import ContainerClient as AsyncContainerClient

    store = _sdk_store(azurite, container)
    for partition in "012":
        _sdk_checkpoint(store, "analytics", partition, 10 + int(partition))
    _sdk_claim(store, "analytics", "2", "owner-z")
    sync_state = CheckpointReader(_container(azurite, container), NAMESPACE, HUB).read("analytics")
    counter = RequestCounter()

    async def read():  # type: ignore[no-untyped-def]
        async with AsyncContainerClient.from_connection_string(
            azurite.connection_string, container, raw_request_hook=counter  # type: ignore[attr-defined]
        ) as client:
            return await AsyncCheckpointReader(client, NAMESPACE, HUB).read("analytics")

    async_state = asyncio.run(read())

    assert async_state == sync_state
    assert len(counter.requests) == 1


def test_async_reader_reports_a_missing_container(azurite: object) -> None:
    from azure.storage.blob.aio import ContainerClient as AsyncContainerClient

    async def read() -> None:
        async with AsyncContainerClient.from_connection_string(azurite.connection_string, "gone") as client:  # type: ignore[attr-defined]
            await AsyncCheckpointReader(client, NAMESPACE, HUB).read("$Default")

    with pytest.raises(CheckpointStoreError, match="container 'gone' does not exist"):
        asyncio.run(read())



LOCAL = "127.0.0.1:5672"  # a namespace with a port: Python writes it with the port, JavaScript without


def test_reads_checkpoints_and_ownership_written_with_and_without_the_namespace_port(
    azurite: object, container: str
) -> None:
    client = _container(azurite, container)
    client.upload_blob(f"{LOCAL}/orders/$default/checkpoint/0", b"", metadata={"sequencenumber": "4"})  # Python
    client.upload_blob("127.0.0.1/orders/$default/checkpoint/1", b"", metadata={"sequencenumber": "9"})  # JavaScript
    client.upload_blob("127.0.0.1/orders/$default/ownership/1", b"", metadata={"ownerid": "js-processor"})
    client.upload_blob("127.0.0.1/Orders/$Default/checkpoint/2", b"", metadata={"SequenceNumber": "2"})  # any case
    client.upload_blob("127.0.0.2/orders/$default/checkpoint/3", b"", metadata={"sequencenumber": "7"})  # other host
    counter = RequestCounter()

    state = CheckpointReader(_container(azurite, container, raw_request_hook=counter), LOCAL, HUB).read("$Default")

    assert {p: c.sequence_number for p, c in state.checkpoints.items()} == {"0": 4, "1": 9, "2": 2}
    assert state.ownership["1"].owner_id == "js-processor"
    assert len(counter.requests) == 2  # one list per spelling


def test_when_a_partition_has_both_port_spellings_the_most_recently_written_wins(azurite: object, container: str) -> None:
    client = _container(azurite, container)
    client.upload_blob(f"{LOCAL}/orders/$default/checkpoint/0", b"", metadata={"sequencenumber": "50"})
    client.upload_blob("127.0.0.1/orders/$default/ownership/0", b"", metadata={"ownerid": "retired"})
    time.sleep(1.1)  # blob last-modified has one-second resolution
    client.upload_blob("127.0.0.1/orders/$default/checkpoint/0", b"", metadata={"sequencenumber": "20"})
    client.upload_blob(f"{LOCAL}/orders/$default/ownership/0", b"", metadata={"ownerid": "running"})

    async def read():  # type: ignore[no-untyped-def]
        from azure.storage.blob.aio import ContainerClient as AsyncContainerClient

        async with AsyncContainerClient.from_connection_string(azurite.connection_string, container) as aclient:  # type: ignore[attr-defined]
            return await AsyncCheckpointReader(aclient, LOCAL, HUB).read("$Default")

    for state in (CheckpointReader(client, LOCAL, HUB).read("$Default"), asyncio.run(read())):
        assert state.sequence_number("0") == 20
        assert state.checkpoints["0"].blob_name == "127.0.0.1/orders/$default/checkpoint/0"
        assert state.ownership["0"].owner_id == "running"
