"""The default claim wait outlasts a crashed holder's lease but not a live holder: a run cleared right
after a SIGKILLed one publishes, a run beside a live one is fenced off with a clear error."""

from __future__ import annotations

import signal
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from publish_kit import PublishSetup, assert_exactly_once, batch, events_for

from airflow_provider_eh.errors import ProducerDisconnectedError
from airflow_provider_eh.publishing import BlobProducerStateStore, IdempotentPublisher, StateKey


def test_default_claim_wait_outlasts_a_crashed_holder_and_fences_a_live_one(setup: PublishSetup) -> None:
    crashed_events = [dict(e, partition_id="0") for e in events_for("crashed", 40)]
    crashed = setup.start(crashed_events, batch("crashed"), crash_at="after_intent")  # SIGKILLed holding its lease
    _, err = crashed.communicate(timeout=120)
    assert crashed.returncode == -signal.SIGKILL, err[-2000:]
    killed_at = time.monotonic()

    live_store = BlobProducerStateStore(setup.container)
    live = live_store.claim(StateKey(setup.endpoint.namespace, setup.hub, "g", "1"))  # renewed in the background

    def newcomer(events: list[Any], name: str) -> Any:
        store = BlobProducerStateStore(setup.container)  # the default claim_timeout
        return IdempotentPublisher(setup.endpoint, store, producer_group="g").publish(events, batch_id=batch(name))

    live_events = [dict(e, partition_id="1") for e in events_for("fenced", 5)]
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            after_crash = pool.submit(newcomer, crashed_events, "crashed")
            beside_live = pool.submit(newcomer, live_events, "fenced")
            results = after_crash.result(timeout=120)
            waited = time.monotonic() - killed_at
            with pytest.raises(ProducerDisconnectedError) as fenced:
                beside_live.result(timeout=120)
    finally:
        live_store.release(live)
    assert results["0"].events == 40 and results["0"].status == "recovered"
    assert waited < 40, waited
    assert_exactly_once(setup.read_back(), crashed_events)
    message = str(fenced.value)
    assert "another publisher holds the lease" in message and "it is alive" in message
    assert "let the other run finish" in message and not live.lost.is_set()
