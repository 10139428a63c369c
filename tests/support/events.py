"""What the event-driven example's test and `make demo` share: its DAGs folder, order events, the triggerer.

- :func:`event_dags_folder`: a DAGs folder with only ``eh_on_new_orders`` (and ``_orders``), so a
  scheduler with scheduled runs on (asset-triggered runs need it) starts no other example DAG;
- :func:`publish_orders`: order events as the example pipeline publishes them (body and properties),
  each order sent by :func:`send_order`;
- :func:`triggerer_pids`: the triggerer processes under a standalone;
- :func:`start_triggerer`: a triggerer of its own, in a process group of its own;
- :func:`fire_trigger`: what an event trigger yields, its ``run()`` driven in this process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psutil

REPO = Path(__file__).resolve().parents[2]
DAG_FILES = ("eh_on_new_orders.py", "_orders.py")


def event_dags_folder(dest: Path) -> Path:
    """A DAGs folder holding links to the event-driven example and what it imports."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in DAG_FILES:
        link = dest / name
        if not link.exists():
            link.symlink_to(REPO / "dags" / name)
    (dest / ".airflowignore").write_text("_orders\\.py\n")
    return dest


def order_events(prefix: str, orders: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(body, properties)`` of ``orders`` orders, each placed, paid and shipped (steps 0, 1, 2)."""
    out = []
    for n in range(orders):
        order_id = f"{prefix}-{n:04d}"
        for step, kind in enumerate(("placed", "paid", "shipped")):
            body = {
                "order_id": order_id, "step": step, "event_type": kind, "final": step == 2,
                "customer_id": f"c-{n % 7}", "amount_cents": 100 + n, "currency": "EUR",
                "event_time": f"2026-11-23T00:{n % 60:02d}:{step:02d}Z",
            }
            out.append((body, {"order_id": order_id, "step": step, "final": step == 2}))
    return out


def publish_orders(endpoint: Any, prefix: str, orders: int) -> int:
    """Send the orders' events, each order's events to one partition (its key), in order; how many were sent."""
    events = order_events(prefix, orders)
    with endpoint.producer() as producer:
        for start in range(0, len(events), 3):
            send_order(producer, events[start:start + 3])
    return len(events)


def send_order(producer: Any, order: Sequence[tuple[dict[str, Any], Any]]) -> None:
    """Send one order's events (from :func:`order_events`) in one SDK batch keyed by the order, so to one
    partition in order; returns once the service acknowledged them."""
    from azure.eventhub import EventData

    batch = producer.create_batch(partition_key=order[0][1]["order_id"])
    for body, props in order:
        event = EventData(json.dumps(body))
        event.properties = props
        batch.add(event)
    producer.send_batch(batch)


def send_json(event_hubs_conn_id: str, partition: str, bodies: list[dict[str, Any]]) -> None:
    """Send ``bodies`` as JSON events to ``partition`` in one SDK batch, through the hook's producer."""
    from azure.eventhub import EventData

    from airflow_provider_eh.hooks.event_hubs import EventHubHook

    with EventHubHook(event_hubs_conn_id).get_producer_client() as producer:
        batch = producer.create_batch(partition_id=partition)
        for body in bodies:
            batch.add(EventData(json.dumps(body)))
        producer.send_batch(batch)


def triggerer_pids(root_pid: int) -> list[int]:
    """The ``airflow triggerer`` processes under ``root_pid`` (the triggerer and its trigger runner)."""
    import psutil  # a dev dependency: only the test and the demo call this

    try:
        children = psutil.Process(root_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    tops = [p for p in children if "triggerer" in " ".join(_cmdline(p))]
    pids = {p.pid for p in tops}
    for p in tops:
        try:
            pids.update(c.pid for c in p.children(recursive=True))
        except psutil.NoSuchProcess:
            pass
    return sorted(pids)


def _cmdline(proc: psutil.Process) -> list[str]:
    import psutil

    try:
        return proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []


def start_triggerer(env: dict[str, str], log: Path) -> subprocess.Popen:
    """``airflow triggerer`` in a process group of its own (stop it with :func:`stop_group`)."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "airflow", "triggerer"], env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, cwd=log.parent,
        )


def stop_group(proc: subprocess.Popen) -> None:
    """End ``proc``'s process group (started with ``start_new_session``)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def fire_trigger(trigger: Any, events: int, timeout: float = 90) -> list[dict[str, Any]]:
    """The payloads of the first ``events`` events ``trigger.run()`` yields; then it checkpoints the last and stops.

    Resuming the generator once more after the last wanted event is what writes that batch's checkpoint
    (as the triggerer does when it stores the event); it is stopped at its next idle window.
    """
    import asyncio

    async def take() -> list[dict[str, Any]]:
        out = []
        gen = trigger.run()
        async for event in gen:
            out.append(event.payload)
            if len(out) == events:
                break
        try:
            await asyncio.wait_for(gen.__anext__(), timeout=trigger.batch_seconds + 3)
        except (TimeoutError, StopAsyncIteration):
            pass
        await gen.aclose()
        return out

    return asyncio.run(asyncio.wait_for(take(), timeout=timeout))


def send_filled(producer: Any, partition_id: str, bodies: Iterable[bytes | str]) -> int:
    """Send ``bodies`` to one partition through an SDK producer client, each SDK batch filled to the
    link's limit (what a plain pipeline does); how many SDK batches were sent."""
    from azure.eventhub import EventData

    batch, sent = producer.create_batch(partition_id=partition_id), 0
    for body in bodies:
        event = EventData(body)
        try:
            batch.add(event)
        except ValueError:
            producer.send_batch(batch)
            sent += 1
            batch = producer.create_batch(partition_id=partition_id)
            batch.add(event)
    producer.send_batch(batch)
    return sent + 1
