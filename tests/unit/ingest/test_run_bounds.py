"""A run's per-partition bound: the hub's end, or lower where ``RunLimits.upto`` names a partition."""

from __future__ import annotations

from airflow_provider_eh.ingest.limits import RunLimits
from airflow_provider_eh.ingest.runner import IngestRun


class _Hub:
    """The two management calls a run's bound needs; partition 2 is empty."""

    eventhub_name = "orders"
    fully_qualified_namespace = "ns.example"
    LAST = {"0": 40, "1": 7, "2": None}

    def get_partition_ids(self):
        return list(self.LAST)

    def get_partition_properties(self, partition_id):
        last = self.LAST[partition_id]
        return {"is_empty": last is None, "last_enqueued_sequence_number": -1 if last is None else last}



def _targets(limits: RunLimits) -> dict[str, int]:
    hub = _Hub()
    ends, targets = IngestRun(hub, "$Default", None, None, owner_id="t", limits=limits)._targets(hub)
    assert ends == {"0": 40, "1": 7, "2": -1}  # the lag's first figures: every partition's end, upto or not
    return targets


def test_without_upto_every_partition_runs_to_its_end():
    assert _targets(RunLimits()) == {"0": 40, "1": 7, "2": -1}


def test_upto_lowers_the_bound_and_leaves_out_partitions_it_does_not_name():
    assert _targets(RunLimits(upto={"0": 12, "1": 99})) == {"0": 12, "1": 7}


def test_upto_naming_a_partition_the_hub_lacks_is_ignored():
    assert _targets(RunLimits(upto={"0": 3, "9": 5})) == {"0": 3}
