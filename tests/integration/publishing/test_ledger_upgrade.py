"""An upgrade from the previous release keeps every committed batch: ledgers written by that release's
wheel (version 1 documents, every committed batch inside), on both backends, are moved into records by
this release's first claim, and re-running every old batch sends nothing.

The previous release is the wheel built from :data:`PREVIOUS_RELEASE` of this repository's history
(the last commit whose ledger was one document), installed with ``--target`` into a directory of its
own and run in a process whose path holds that directory and not the checkout.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from publish_kit import PublishSetup, assert_exactly_once, events_for

from airflow_provider_eh.publishing import IdempotentPublisher, StateKey, VariableProducerStateStore, derive_batch_id
from tests.support.variables import DictVariables
from tests.compat.test_wheel_on_airflow_floor import uv
from tests.conftest import REPO

PREVIOUS_RELEASE = "43900cb003dff7c51e322ece80b4e1b7bbdeea5a"
BATCHES = 12
EVENTS_PER_BATCH = 40


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's wheel, installed into a directory of its own."""
    tmp = tmp_path_factory.mktemp("previous-release")
    source = tmp / "source"
    source.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", PREVIOUS_RELEASE], capture_output=True,
                             timeout=120)
    assert archive.returncode == 0, (f"commit {PREVIOUS_RELEASE} (the previous release) is not in this clone's history: "
                                     f"{archive.stderr.decode()[-500:]}; clone with full history (no --depth)")
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True, timeout=120)
    wheels = tmp / "wheel"
    subprocess.run([uv(), "build", "--wheel", "--quiet", "--out-dir", str(wheels), str(source)], check=True, timeout=300)
    (wheel,) = wheels.glob("airflow_provider_eh-*.whl")
    target = tmp / "installed"
    subprocess.run([uv(), "pip", "install", "--quiet", "--no-deps", "--python", sys.executable, "--target", str(target),
                    str(wheel)], check=True, timeout=300)
    return target


# Runs in the previous release: publishes every batch of the config on the blob backend and on the
# Variables backend (over a JSON file), and prints where the package was imported from.
OLD_PUBLISHER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from azure.storage.blob import ContainerClient
    import airflow_provider_eh
    from airflow_provider_eh.client.endpoint import EventHubsEndpoint
    from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher, VariableProducerStateStore

    config = json.loads(Path(sys.argv[1]).read_text())
    values = {}

    class Variables:
        def get(self, key):
            return values.get(key)

        def set(self, key, value):
            values[key] = value

    endpoint = EventHubsEndpoint.from_connection_string(config["eh"], config["hub"])
    container = ContainerClient.from_connection_string(config["blob"], config["container"])
    stores = {"blob": BlobProducerStateStore(container, claim_timeout=0), "variable": VariableProducerStateStore(Variables())}
    for backend, store in stores.items():
        publisher = IdempotentPublisher(endpoint, store, producer_group="g-" + backend)
        for batch_id, events in config["batches"][backend]:
            publisher.publish(events, batch_id=batch_id)
    Path(config["variables"]).write_text(json.dumps(values))
    print(airflow_provider_eh.__file__)
""")


def assert_each_group_once(setup: PublishSetup, events: dict[str, list[dict[str, Any]]]) -> None:
    """Every event of each backend's producer group exactly once (each group numbers its own events)."""
    read = setup.read_back()
    for backend, sent in events.items():
        assert_exactly_once([e for e in read if e.properties["eh.group"] == f"g-{backend}"], sent)
    assert len(read) == sum(map(len, events.values()))


def test_ledgers_of_the_previous_release_move_into_records_and_rerunning_every_old_batch_sends_nothing(
    setup: PublishSetup, previous_release: Path, tmp_path: Path,
) -> None:
    batches: dict[str, list[tuple[str, list[dict[str, Any]]]]] = {
        backend: [(derive_batch_id(f"g-{backend}", "daily", "publish", logical_date=f"2026-01-{day:02d}"),
                   events_for(f"{backend}-{day}", EVENTS_PER_BATCH)) for day in range(1, BATCHES + 1)]
        for backend in ("blob", "variable")
    }
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "eh": setup.event_hubs.connection_string(setup.hub), "hub": setup.hub, "blob": setup.azurite.connection_string,
        "container": setup.container_name, "batches": batches, "variables": str(tmp_path / "variables.json"),
    }))
    env = {"PYTHONPATH": str(previous_release), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    old = subprocess.run([sys.executable, "-c", OLD_PUBLISHER, str(config)], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert old.returncode == 0, old.stderr[-3000:]
    assert Path(old.stdout.strip()).is_relative_to(previous_release), f"the previous release ran from {old.stdout}"
    everything = {backend: [e for _, events in runs for e in events] for backend, runs in batches.items()}
    assert_each_group_once(setup, everything)

    # what the previous release left: version 1 documents holding every committed batch
    key = StateKey(setup.endpoint.namespace, setup.hub, "g-blob", "0")
    document = json.loads(setup.container.download_blob(key.blob_name).readall())
    assert document["version"] == 1 and len(document["committed"]) == BATCHES
    values: dict[str, str] = json.loads((tmp_path / "variables.json").read_text())
    assert {json.loads(v)["version"] for v in values.values()} == {1} and len(values) == 4

    # this release: every old batch again, on both backends, sends nothing
    stores = {"blob": setup.publisher("g-blob").store, "variable": VariableProducerStateStore(DictVariables(values))}
    for backend, store in stores.items():
        publisher = IdempotentPublisher(setup.endpoint, store, producer_group=f"g-{backend}")
        statuses = Counter(r.status for batch_id, events in batches[backend]
                           for r in publisher.publish(events, batch_id=batch_id).values())
        assert statuses == Counter({"already_committed": BATCHES * 4}), (backend, statuses)
        state = store.read(StateKey(setup.endpoint.namespace, setup.hub, f"g-{backend}", "0"))
        assert (state.ledger.first, state.ledger.next, state.unmigrated) == (0, BATCHES, {})
        # the ledger in commit order, as the view pages it
        page = store.history(StateKey(setup.endpoint.namespace, setup.hub, f"g-{backend}", "1"), limit=5)
        assert [r.batch_id for r in page.batches] == [b for b, _ in batches[backend]][::-1][:5]
        # and the next day goes on from where the previous release stopped
        nxt = events_for(f"{backend}-next", EVENTS_PER_BATCH)
        result = publisher.publish(nxt, batch_id=derive_batch_id(f"g-{backend}", "daily", "publish", logical_date="2026-02-01"))
        assert {r.status for r in result.values()} == {"published"}
        assert {r.first_seq for r in result.values()} == {BATCHES * EVENTS_PER_BATCH // 4}
        everything[backend] += nxt
    assert_each_group_once(setup, everything)
    document = json.loads(setup.container.download_blob(key.blob_name).readall())
    assert document["version"] == 2 and "committed" not in document
    records = [b.name for b in setup.container.list_blobs(name_starts_with="_ledger/")]
    assert sum("/batch/" in name for name in records) == (BATCHES + 1) * 4 == sum("/history/" in name for name in records)
    assert sum(".batch." in name for name in values) == (BATCHES + 1) * 4
