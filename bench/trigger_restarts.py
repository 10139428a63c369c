"""Does a watcher's trigger that fails at start hold memory across Airflow's restarts of it?

``.venv/bin/python bench/trigger_restarts.py --starts 60``

An asset watcher whose hub does not exist ends at once with ``EventTriggerConfigError`` and the
triggerer starts it again every few seconds, for as long as the DAG is deployed (the scheduler soak
sees some 400 such starts). This runs :class:`EventHubEventTrigger` that many times in one process
against the local endpoint (a hub that is missing; Azurite for the checkpoint container) and samples
the process's RSS after a garbage collection: growth from the end of the warm-up (``--warmup``
starts) to the last start.

Last line: ``starts=… rss_warm_mib=… rss_last_mib=… rss_growth_pct=…``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from eventhubs_local import EmulatorProcess  # noqa: E402
from eventhubs_local.azurite import AzuriteProcess  # noqa: E402
from tests.support.stack import connection_env  # noqa: E402


async def start_once(trigger_class: type) -> str:
    """One start of a watcher's trigger on the missing hub; the error it ended with."""
    trigger = trigger_class(eventhub_name="missing-hub", consumer_group="airflow-watcher", checkpoint_container="watcher")
    try:
        async for _ in trigger.run():
            return "fired"
    except Exception as exc:  # the triggerer logs it and starts the trigger again
        return type(exc).__name__
    return "ended"


async def soak(starts: int, warmup: int) -> tuple[float, float]:
    """Start a failing watcher trigger ``starts`` times; the RSS (MiB) after the warm-up and at the end."""
    from airflow_provider_eh.triggers.event import EventHubEventTrigger

    proc = psutil.Process()
    warm = last = 0.0
    for i in range(1, starts + 1):
        outcome = await start_once(EventHubEventTrigger)
        if outcome != "EventTriggerConfigError":
            raise SystemExit(f"start {i} ended with {outcome}, not the configuration error of a missing hub")
        gc.collect()
        rss = proc.memory_info().rss / 2**20
        if i == warmup:
            warm = rss
        last = rss
        if i % 10 == 0:
            print(f"  {i} starts: {rss:.1f} MiB, {len(asyncio.all_tasks())} task(s) alive", flush=True)
    return warm, last


def main() -> int:
    """Report the memory growth of repeated failing trigger starts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-trigger-restarts-") as tmp:
        root = Path(tmp)
        os.environ.update({
            "AIRFLOW_HOME": str(root / "airflow-home"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        })
        with EmulatorProcess(root / "eh", hubs={"present": 2}, extra_args=["--log-level", "WARNING"]) as eh, \
                AzuriteProcess(root / "azurite") as azurite:
            os.environ.update(connection_env(event_hubs=eh.connection_string(), blob=azurite.connection_string))
            warm, last = asyncio.run(soak(args.starts, args.warmup))
    growth = 100.0 * (last - warm) / warm
    print(f"starts={args.starts} rss_warm_mib={warm:.1f} rss_last_mib={last:.1f} rss_growth_pct={growth:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
