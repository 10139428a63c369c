"""``--dist loadfile`` that goes on after a worker crashed, instead of waiting for ever.

pytest-xdist 3.8's file scheduling mishandles a crashed worker (pytest-xdist issues 1313, 1323, 1327
and 1378): it puts back on the queue every file the worker had been given, finished ones included,
and hands them out again as empty units that no test report ever completes; it queues the test that
crashed to run again; and it gives the replacement worker a single test, which a worker does not start
before it knows the next one. Any of these can leave every worker idle and the run waiting until CI
kills it, with no summary. A worker ends mid-test when a test kills it or when the ``watchdog`` ends
a test stuck far past its timeout, so a run must survive that and report the test.

:class:`CrashSafeLoadFileScheduling` requeues only the tests a crashed worker had not run, reports
the one it crashed on as failed once (pytest-xdist's own report) without running it again, and keeps
every worker given at least two tests or told to shut down; a replacement worker gets tests once
it has collected them.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling
from xdist.workermanage import WorkerController


class CrashSafeLoadFileScheduling(LoadFileScheduling):
    """pytest-xdist's ``loadfile`` scheduling with a worker's crash handled (see the module)."""

    def remove_node(self, node: WorkerController) -> str | None:
        workload = self.assigned_work.pop(node)
        if not self._pending_of(workload):
            return None
        crashitem = next(nodeid for unit in workload.values() for nodeid, done in unit.items() if not done)
        for scope, unit in workload.items():
            if crashitem in unit:
                unit[crashitem] = True  # reported failed (pytest-xdist's report), never run again
            if not all(unit.values()):
                self.workqueue[scope] = unit
        for other in self.assigned_work:
            self._reschedule(other)
        return crashitem

    def _reschedule(self, node: WorkerController) -> None:
        if node not in self.registered_collections or self.collection is None:
            return  # a replacement still collecting: scheduled once its collection is in
        try:
            super()._reschedule(node)
            # a worker runs a test once it knows the next one: never leave it holding a single test
            while not node.shutting_down and self._pending_of(self.assigned_work[node]) < 2:
                if not self.workqueue:
                    node.shutdown()
                    break
                self._assign_work_unit(node)
        except OSError:  # the worker is gone too; its own crash report requeues what it was given
            return


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadFileScheduling | None:
    return CrashSafeLoadFileScheduling(config, log) if config.getvalue("dist") == "loadfile" else None
