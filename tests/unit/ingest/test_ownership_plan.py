"""Load balancing of partitions between instances of one bounded run."""

from __future__ import annotations

from airflow_provider_eh.ingest.ownership import Claim, plan_claims

P = ["0", "1", "2", "3"]


def plan(owner, claims, pending=P, **kw):
    kw.setdefault("expiry", 10.0)
    return plan_claims(owner_id=owner, partition_ids=P, claims=claims, pending=pending, **kw)


def test_balanced_claims_one_partition_per_cycle_and_greedy_its_whole_share():
    assert plan("a", {}, instances=2) == ["0"]
    assert plan("a", {}, instances=2, strategy="greedy") == ["0", "1"]


def test_second_instance_takes_the_free_half_and_never_more_than_its_share():
    claims = {"0": Claim("0", "a", 1, "e"), "1": Claim("1", "a", 1, "e")}
    assert plan("b", claims, instances=2, strategy="greedy") == ["2", "3"]
    mine = {**claims, "2": Claim("2", "b", 1, "e"), "3": Claim("3", "b", 1, "e")}
    assert plan("b", mine, instances=2) == []


def test_partitions_of_a_dead_instance_are_taken_over_only_after_expiry():
    claims = {p: Claim(p, "a" if p in "01" else "dead", 3, "e") for p in P}
    assert plan("a", claims, pending=["2", "3"], instances=2) == []
    expired = {**claims, "2": Claim("2", "dead", 11, "e"), "3": Claim("3", "dead", 11, "e")}
    assert plan("a", expired, pending=["2", "3"], instances=2) == ["2"]
    assert plan("a", expired, pending=["2", "3"], instances=2, strategy="greedy") == ["2", "3"]


def test_never_claimed_partitions_wait_for_their_instance_for_one_expiry_period():
    claims = {"0": Claim("0", "a", 1, "e"), "1": Claim("1", "a", 1, "e")}
    assert plan("a", claims, pending=["2", "3"], instances=2, idle_for=5) == []
    assert plan("a", claims, pending=["2", "3"], instances=2, idle_for=10) == ["2"]


def test_without_known_instances_an_owner_of_too_many_is_stolen_from():
    claims = {p: Claim(p, "a", 1, "e") for p in P}
    assert plan("b", claims) == ["0"]
    assert plan("b", claims, instances=2) == []
