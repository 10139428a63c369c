"""The Event Hubs view through a running ``airflow standalone`` served under a sub-path: its API, its access
rules, what it never discloses, and the page in Chromium."""

from __future__ import annotations

import base64
import json
import sqlite3
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from azure.storage.blob import BlobServiceClient
from tab_checks import (  # noqa: F401  (the task-instance tab's tests, on this module's view_stack)
    test_browser_finds_the_tab_on_each_kind_of_task_instance_page,
    test_no_secret_reaches_a_tab_answer,
    test_tab_api_shows_the_publish_the_sensor_and_the_ingest_of_the_run,
    test_tab_refuses_a_user_who_may_not_read_the_dag,
    test_tab_refuses_anonymous_401_and_a_user_without_connection_access_403,
    test_tab_shows_a_publish_on_the_variables_backend_with_its_ledger_entries,
)
from ui_kit import (
    BACKLOG_CHECKPOINT, BASE_PATH, CHECKPOINT_GROUP, DAG_EVENTS, DAG_ID, HISTORY_BATCHES, KEYS, LOGICAL_DATE, MARK, PARTITIONS,
    REPLAY_EVENTS,
    REPLAY_PARTIAL_EVENTS, REPLAY_PARTITION, VARIABLES_DAG_ID, VARIABLES_EVENTS, VARIABLES_PARTITIONS, ViewStack,
)

from airflow_provider_eh.client.readback import read_hub
from airflow_provider_eh.plugins.readers.reading import Source
from airflow_provider_eh.plugins.sampler import Sampler, SamplingSettings, sample
from airflow_provider_eh.plugins.samples import SampleStore, blob_name, bucket_of, bucket_start


def _groups(body: dict) -> dict[str, dict[str, dict]]:
    return {g["group"]: {p["partition"]: p for p in g["partitions"]} for g in body["producer_groups"]}


def _consumers(body: dict) -> dict[str, dict[str, dict]]:
    return {g["consumer_group"]: {p["partition"]: p for p in g["partitions"]} for g in body["consumer_groups"]}


def _await_lag_times(view_stack: ViewStack, token: str, timeout: float = 120) -> dict:
    """``/api/consumers`` once every partition's lag in time is known."""
    deadline = time.monotonic() + timeout
    while True:
        body = view_stack.view("/api/consumers", token).json()
        if all(p["lag_seconds"] is not None for g in body["consumer_groups"] for p in g["partitions"]):
            return body
        assert time.monotonic() < deadline, f"lag in time still unknown after {timeout} s: {body}"
        time.sleep(1)


def _bare(view_stack: ViewStack, path: str, token: str | None = None, **params: str) -> httpx.Response:
    """A request of the view's API with only ``params``: nothing the stack would otherwise name."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(f"{view_stack.airflow.base}/eventhubs{path}", params=params, headers=headers, timeout=120)


BLOB_GROUPS = {f"{DAG_ID}.publish", "replay", "history", "backfill"}


def _time(text: str) -> datetime:  # the REST API writes "Z", the view "+00:00"
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_api_shows_the_publish_the_crashed_publish_and_the_ingest_run(view_stack: ViewStack) -> None:
    airflow = view_stack.airflow
    token = airflow.token("admin")
    response = view_stack.view("/api/overview", token)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["hub"] == view_stack.hub and sorted(body["partitions"]) == [str(p) for p in range(PARTITIONS)]
    groups = _groups(body)

    # the DAG's publish: what its task returned (XCom) is what the ledger shows, linked to its task instance
    (run,) = airflow.runs(DAG_ID)
    xcom = airflow.get(f"/dags/{DAG_ID}/dagRuns/{run['dag_run_id']}/taskInstances/publish/xcomEntries/return_value")
    assert xcom.status_code == 200, xcom.text
    returned = xcom.json()["value"]
    returned = json.loads(returned) if isinstance(returned, str) else returned
    published = groups[f"{DAG_ID}.publish"]
    assert sorted(published) == sorted(returned) == [str(p) for p in range(PARTITIONS)]
    for pid, result in returned.items():
        row = published[pid]
        assert row["next_sequence_number"] == result["last_seq"] + 1
        assert row["owner_level"] >= 1 and row["open_batches"] == []
        last = row["last_committed"]
        assert (last["events"], last["first_seq"], last["last_seq"]) == (result["events"], result["first_seq"], result["last_seq"])
        assert last["task_instance"]["dag_id"] == DAG_ID and last["task_instance"]["task_id"] == "publish"
        assert last["task_instance"]["run_id"] == run["dag_run_id"]
    assert sum(r["last_committed"]["events"] for r in published.values()) == DAG_EVENTS
    # the task (a subclass with generation 1) is linked with its run's interval; the batch was committed while it ran
    (ti,) = [t for t in airflow.task_instances(DAG_ID, run["dag_run_id"]) if t["task_id"] == "publish"]
    for row in published.values():
        link, committed_at = row["last_committed"]["task_instance"], _time(row["last_committed"]["committed_at"])
        for end in ("start", "end"):
            shown, ran = link[f"interval_{end}"], run[f"data_interval_{end}"]
            assert (shown and _time(shown)) == (ran and _time(ran)) and (shown or ran) is not None
        assert link["map_index"] == -1
        assert _time(ti["start_date"]) <= committed_at <= _time(ti["end_date"])

    # the publish killed in partition 2 and followed by another batch of its group: partial, with its age
    replay = groups["replay"][REPLAY_PARTITION]
    (partial,) = replay["open_batches"]
    assert (partial["kind"], partial["batch_id"], partial["events"], partial["landed"]) == (
        "partial", view_stack.partial_batch, REPLAY_PARTIAL_EVENTS, 0)
    assert 0 <= partial["age_seconds"] < 3600 and partial["stale"] is False and partial["task_instance"] is None
    assert replay["last_committed"]["events"] == REPLAY_EVENTS and replay["last_committed"]["committed_at"]
    assert replay["last_committed"]["task_instance"] is None  # published outside Airflow

    # a ledger's history, a page at a time, newest first; the DAG's batch linked to its task instance
    assert groups["history"]["1"]["committed_batches"] == HISTORY_BATCHES
    pages, before = [], None
    while True:
        page = view_stack.view("/api/history", token, group="history", partition="1", limit=2,
                               **({} if before is None else {"before": before}))
        assert page.status_code == 200, page.text
        pages.append(page.json())
        before = pages[-1]["before"]
        if before is None:
            break
    assert [[b["ordinal"] for b in p["batches"]] for p in pages] == [[2, 1], [0]] and pages[0]["total"] == HISTORY_BATCHES
    assert pages[0]["batches"][0]["batch_id"] == groups["history"]["1"]["last_committed"]["batch_id"]
    (dag_batch,) = view_stack.view("/api/history", token, group=f"{DAG_ID}.publish", partition="0").json()["batches"]
    assert dag_batch["task_instance"] == published["0"]["last_committed"]["task_instance"]
    assert dag_batch["events"] == published["0"]["last_committed"]["events"]
    bad = view_stack.view("/api/history", token, group="history", partition="1", limit=0)
    assert bad.status_code == 422

    # the killed publish: a pending batch on partition 3, with its age; stale only past the threshold
    (pending,) = groups["backfill"]["3"]["open_batches"]
    assert pending["kind"] == "pending" and pending["batch_id"] == view_stack.crashed_batch and pending["events"] == 5
    assert 0 <= pending["age_seconds"] < 3600 and pending["stale"] is False and pending["task_instance"] is None
    assert groups["backfill"]["3"]["last_committed"] is None
    strict = view_stack.view("/api/overview", token, pending_threshold_seconds=0).json()
    assert _groups(strict)["backfill"]["3"]["open_batches"][0]["stale"] is True

    # consumer lag: analytics read before the DAG's publish, $Default after it
    in_hub = Counter(e.partition for e in read_hub(airflow_endpoint(view_stack)))
    consumers = _consumers(body)
    assert set(consumers) == {"analytics", "$default", "backlog"}  # discovered from blob paths, which the SDKs lower-case
    # lag in time needs the first unprocessed event's enqueued time, read in the background: a later read has it
    timed_body = _await_lag_times(view_stack, token)
    timed = _consumers(timed_body)
    read_at = _time(timed_body["read_at"]).timestamp()
    sent_before, sent_after = view_stack.stamped_sent
    for pid in map(str, range(PARTITIONS)):
        assert consumers["$default"][pid]["lag_events"] == 0
        assert consumers["$default"][pid]["last_enqueued"] == in_hub[pid] - 1
        assert consumers["$default"][pid]["lag_seconds"] == 0
        assert consumers["analytics"][pid]["lag_events"] == DAG_EVENTS // PARTITIONS
        assert consumers["analytics"][pid]["checkpointed"] == in_hub[pid] - 1 - DAG_EVENTS // PARTITIONS
        assert timed["analytics"][pid]["lag_seconds"] > 0
        assert timed["analytics"][pid]["lag_seconds"] <= read_at - sent_after + 1  # its oldest unread event is the DAG's
        # a backlog enqueued before the checkpoint was written: behind by the events after it, and by their age
        backlog = consumers["backlog"][pid]
        assert backlog["checkpointed"] == BACKLOG_CHECKPOINT and backlog["lag_events"] == in_hub[pid] - 1 - BACKLOG_CHECKPOINT
        backlog = timed["backlog"][pid]
        assert view_stack.backlog_checkpointed - sent_after - 1 <= backlog["lag_seconds"] <= read_at - sent_before + 1
        assert _time(backlog["oldest_unprocessed_enqueued_at"]).timestamp() <= sent_after + 1

    # dead letters of the $Default sink, by reason, as the sink's table holds them
    with sqlite3.connect(view_stack.sink_db) as conn:
        rows = conn.execute("SELECT reason, partition_id FROM eh_ingest_dead_letter WHERE status = 'dead' AND consumer_group = '$Default'").fetchall()
    assert len(rows) == 2
    dead = body["dead_letters"]
    assert dead["total"] == len(rows)
    assert {r["reason"]: (r["count"], r["partitions"]) for r in dead["by_reason"]} == {
        reason: (n, dict(Counter(p for rr, p in rows if rr == reason))) for reason, n in Counter(r for r, _ in rows).items()
    }
    assert "--sql-conn-id sink_view" in dead["replay_command"] and dead["replay_command"].endswith(" replay")

    refreshed = view_stack.view("/api/consumers", token)
    assert refreshed.status_code == 200
    assert {g["consumer_group"] for g in refreshed.json()["consumer_groups"]} == {"analytics", "$default", "backlog"}


def test_api_finds_connections_hubs_and_groups_of_both_state_backends_with_nothing_named(view_stack: ViewStack) -> None:
    token = view_stack.airflow.token("admin")
    listed = _bare(view_stack, "/api/connections", token)
    assert listed.status_code == 200, listed.text
    connections = {c["conn_id"]: c for c in listed.json()["connections"]}
    # every azure_event_hubs connection (environment variables here), no other type
    assert set(connections) == {"azure_event_hubs_default", "eh_view", "eh_refused"}
    assert connections["eh_view"]["hub"] == view_stack.hub and connections["eh_view"]["namespace"].startswith("127.0.0.1:")

    # the default connection names the blob connection and state container, the configuration the checkpoint container
    found = _bare(view_stack, "/api/hubs", token, conn_id="azure_event_hubs_default")
    assert found.status_code == 200, found.text
    body = found.json()
    assert body["settings"] == {
        "wasb_conn_id": {"value": "wasb_view", "from": "connection"},
        "state_container": {"value": view_stack.state_container, "from": "connection"},
        "checkpoint_container": {"value": view_stack.checkpoint_container, "from": "config"},
    }
    assert body["problems"] == [] and body["hub"] == view_stack.hub
    assert {h["name"]: h["found_in"] for h in body["hubs"]} == {
        view_stack.hub: ["checkpoint container", "connection", "state container"],
        view_stack.variables_hub: ["Airflow Variables"],  # published to on the Variables backend only
        view_stack.checkpoint_hub: ["checkpoint container"],  # named by a consumer group's checkpoints only
    }
    # a connection without those fields: the state container is not found, the rest is
    plain = _bare(view_stack, "/api/hubs", token, conn_id="eh_view").json()
    assert plain["settings"]["state_container"] == {"value": None, "from": "none"}
    assert plain["settings"]["wasb_conn_id"] == {"value": "wasb_view", "from": "config"}
    assert {h["name"] for h in plain["hubs"]} == {view_stack.hub, view_stack.variables_hub, view_stack.checkpoint_hub}

    # the connection's own hub, with nothing else named: both backends' groups, every consumer group
    overview = _bare(view_stack, "/api/overview", token, conn_id="azure_event_hubs_default")
    assert overview.status_code == 200, overview.text
    own = overview.json()
    assert own["hub"] == view_stack.hub
    assert {g["group"]: g["backend"] for g in own["producer_groups"]} == dict.fromkeys(BLOB_GROUPS, "blob")
    assert {g["consumer_group"] for g in own["consumer_groups"]} == {"analytics", "$default", "backlog"}
    # the hub of the Variables backend's group: its ledger read from Airflow Variables, linked to its task instance
    variables = _bare(view_stack, "/api/overview", token, conn_id="azure_event_hubs_default", hub=view_stack.variables_hub).json()
    (group,) = variables["producer_groups"]
    assert (group["group"], group["backend"]) == (f"{VARIABLES_DAG_ID}.publish", "variable")
    assert [p["partition"] for p in group["partitions"]] == [str(p) for p in range(VARIABLES_PARTITIONS)]
    for row in group["partitions"]:
        assert row["last_committed"]["events"] == VARIABLES_EVENTS // VARIABLES_PARTITIONS
        assert row["next_sequence_number"] == VARIABLES_EVENTS // VARIABLES_PARTITIONS
        assert row["last_committed"]["task_instance"]["dag_id"] == VARIABLES_DAG_ID
    page = _bare(view_stack, "/api/history", token, conn_id="azure_event_hubs_default", hub=view_stack.variables_hub,
                 group=f"{VARIABLES_DAG_ID}.publish", partition="1", backend="variable")
    assert page.status_code == 200, page.text
    assert [b["batch_id"] for b in page.json()["batches"]] == [group["partitions"][1]["last_committed"]["batch_id"]]
    audited = _bare(view_stack, "/api/overview", token, conn_id="azure_event_hubs_default", hub=view_stack.checkpoint_hub).json()
    assert [(g["consumer_group"], [p["lag_events"] for p in g["partitions"]]) for g in audited["consumer_groups"]] == [
        (CHECKPOINT_GROUP, [1])]

    # who may not read connections gets none listed, and 403 for a connection's hubs
    viewer = view_stack.airflow.token("viewer")
    assert _bare(view_stack, "/api/connections", viewer).json() == {"connections": []}
    refused = _bare(view_stack, "/api/hubs", viewer, conn_id="azure_event_hubs_default")
    assert refused.status_code == 403 and "azure_event_hubs_default" in refused.json()["detail"]
    for path in ("/api/connections", "/api/hubs", "/static/format.js"):
        assert _bare(view_stack, path, conn_id="eh_view").status_code == 401, path


def airflow_endpoint(view_stack: ViewStack):
    from airflow_provider_eh.client.endpoint import EventHubsEndpoint

    return EventHubsEndpoint.from_connection_string(view_stack.eh_conn_str, view_stack.hub)


def test_anonymous_requests_get_401_and_a_user_without_connection_access_403(view_stack: ViewStack) -> None:
    for path in ("/", "/api/overview", "/api/consumers", "/static/view.js"):
        assert view_stack.view(path).status_code == 401, path
    bad = view_stack.view("/api/overview", "not-a-token")
    assert bad.status_code in (401, 403)
    viewer = view_stack.airflow.token("viewer")
    # the viewer role may not read connections, so it may not read what they reach either
    for path in ("/api/overview", "/api/consumers"):
        refused = view_stack.view(path, viewer)
        assert refused.status_code == 403, refused.text
        assert "eh_view" in refused.json()["detail"]
    # the same user may log in and may read the REST API's DAGs: the refusal is about connections
    assert httpx.get(f"{view_stack.airflow.base}/api/v2/dags", headers={"Authorization": f"Bearer {viewer}"}).status_code == 200
    assert httpx.get(f"{view_stack.airflow.base}/api/v2/connections", headers={"Authorization": f"Bearer {viewer}"}).status_code == 403
    assert view_stack.view("/", viewer).status_code == 200  # the page itself holds no data


def test_no_secret_reaches_a_response_also_when_a_key_is_refused_or_a_container_missing(view_stack: ViewStack) -> None:
    token = view_stack.airflow.token("admin")
    answers = {p: view_stack.view(p, token) for p in ("/api/overview", "/api/consumers", "/", "/static/view.js", "/api/hubs")}
    answers["/api/connections"] = _bare(view_stack, "/api/connections", token)
    for conn_id in ("azure_event_hubs_default", "eh_refused"):
        answers[f"/api/hubs {conn_id}"] = _bare(view_stack, "/api/hubs", token, conn_id=conn_id)
    failing = {
        "missing sink connection": ({"sql_conn_id": "missing_conn"}, 404, ["'missing_conn'", "not defined"]),
        # a setting to fix: 400; what is not there: 404 (a 5xx says a refresh may help)
        "refused SAS key": ({"conn_id": "eh_refused"}, 400, ["'eh_refused'", "partitions of Event Hub"]),
        "refused account key": ({"wasb_conn_id": "wasb_refused"}, 400, ["'wasb_refused'", "the credentials were refused"]),
        "missing state container": ({"state_container": f"nothing-{MARK}"}, 404, [f"'nothing-{MARK}'", "not found"]),
        "missing checkpoint container": ({"checkpoint_container": f"nocp-{MARK}"}, 404, [f"'nocp-{MARK}'", "not found"]),
    }
    for name, (params, status, words) in failing.items():
        answers[name] = response = view_stack.view("/api/overview", token, **params)
        assert response.status_code == status, (name, response.text)
        detail = response.json()["detail"]
        assert all(word in detail for word in words), (name, detail)
    answers["refused SAS key, consumers"] = view_stack.view("/api/consumers", token, conn_id="eh_refused")
    assert answers["refused SAS key, consumers"].status_code == 400
    assert all(a.status_code == 200 for n, a in answers.items() if n.startswith("/"))
    secrets = dict(KEYS)
    for name in ("account key", "refused account key"):  # the account keys as the storage client decodes them
        secrets[f"{name}, decoded"] = base64.b64decode(KEYS[name]).decode()
    for name, answer in answers.items():
        for secret_name, secret in secrets.items():
            assert secret not in answer.text, f"the {secret_name} is in the answer to {name}"
        assert MARK not in answer.text.replace(f"nothing-{MARK}", "").replace(f"nocp-{MARK}", ""), name


def _log_in(page, view_stack: ViewStack) -> None:
    page.goto(f"{view_stack.airflow.base}/auth/login")
    page.wait_for("document.querySelector('input[name=username]') !== null")
    page.type("input[name=username]", "admin")
    page.type("input[name=password]", view_stack.airflow.passwords["admin"])
    page.click("button[type=submit]")
    page.wait_for("document.cookie.includes('_token=')")


ROWS_JS = ("Array.from(document.querySelectorAll('#producers tr.producer-row')).map(r => [r.dataset.group, r.dataset.backend, "
           "r.dataset.partition])")
CHARTS_JS = ("Array.from(document.querySelectorAll('.lag-chart')).map(c => [c.dataset.group, "
             "Array.from(c.querySelectorAll('.bar')).map(b => b.dataset.partition)])")


@pytest.mark.requires("chromium")
def test_browser_opens_with_nothing_typed_finds_every_hub_and_keeps_its_state_in_the_url(
        view_stack: ViewStack, tmp_path: Path) -> None:
    from cdp import Chromium

    base = view_stack.airflow.base
    browser = Chromium(tmp_path / "chromium")
    page = None
    try:
        page = browser.page()
        _log_in(page, view_stack)
        page.goto(f"{base}/eventhubs/")
        page.eval("localStorage.clear()")  # nothing remembered from an earlier visit either
        page.goto(f"{base}/eventhubs/")
        page.wait_for("document.querySelectorAll('#producers tr.producer-row').length > 0 && "
                      "document.querySelectorAll('.lag-chart').length > 0")
        # no field filled, and none needed: the selection is in the URL
        assert page.eval("Array.from(document.querySelectorAll('#settings input')).every(i => i.value === '')")
        assert page.eval("document.querySelectorAll('#not-found li').length") == 0
        url = page.eval("Object.fromEntries(new URLSearchParams(location.search))")
        assert url == {"conn_id": "azure_event_hubs_default", "hub": view_stack.hub}
        assert page.eval("Array.from(document.querySelectorAll('#connections a.conn-link')).map(a => a.dataset.conn)") == [
            "azure_event_hubs_default", "eh_refused", "eh_view"]
        hubs = page.eval("Array.from(document.querySelectorAll('#hubs a.hub-link')).map(a => a.dataset.hub)")
        assert sorted(hubs) == sorted([view_stack.hub, view_stack.variables_hub, view_stack.checkpoint_hub])
        rows = page.eval(ROWS_JS)
        assert {(g, b) for g, b, _ in rows} == {(g, "blob") for g in BLOB_GROUPS}
        assert sorted(p for g, _, p in rows if g == f"{DAG_ID}.publish") == [str(p) for p in range(PARTITIONS)]
        charts = dict(page.eval(CHARTS_JS))
        assert charts == {g: [str(p) for p in range(PARTITIONS)] for g in ("analytics", "$default", "backlog")}
        # times for people: relative, the exact time on hover; an interval as its schedule names it
        committed = page.eval("Array.from(document.querySelectorAll('#producers .committed-at time')).map(t => "
                              "[t.textContent, t.getAttribute('datetime'), t.title])")
        assert committed and all(text.endswith(" ago") or text == "just now" for text, _, _ in committed), committed
        for _, iso, title in committed:
            assert title.startswith(iso) and f"\nUTC: {iso[:10]} {iso[11:19]}\nlocal: " in title
        link = page.eval(f"document.querySelector('tr[data-group=\"{DAG_ID}.publish\"] a.ti-link').textContent")
        assert link == f"{DAG_ID}.publish [{LOGICAL_DATE[:10]} 00:00]", link  # a manual run's interval: its logical date

        # another hub: its Variables backend group; the URL follows, back returns
        page.eval(f"document.querySelector('#hubs a[data-hub=\"{view_stack.variables_hub}\"]').click()")
        page.wait_for("document.querySelector('#producers tr.producer-row[data-backend=variable]') !== null")
        assert page.eval(ROWS_JS) == [[f"{VARIABLES_DAG_ID}.publish", "variable", str(p)] for p in range(VARIABLES_PARTITIONS)]
        assert page.eval("new URLSearchParams(location.search).get('hub')") == view_stack.variables_hub
        page.eval("history.back()")
        page.wait_for(f"new URLSearchParams(location.search).get('hub') === {json.dumps(view_stack.hub)} && "
                      "document.querySelectorAll('#producers tr.producer-row[data-backend=blob]').length > 0")
        assert page.eval("document.querySelector('#hubs a.selected').dataset.hub") == view_stack.hub
        page.eval("history.forward()")
        page.wait_for("document.querySelector('#producers tr.producer-row[data-backend=variable]') !== null")
        # the hub only a consumer group's checkpoints name
        page.eval(f"document.querySelector('#hubs a[data-hub=\"{view_stack.checkpoint_hub}\"]').click()")
        page.wait_for(f"document.querySelector('.lag-chart[data-group={CHECKPOINT_GROUP}] .bar') !== null")
        assert page.eval(CHARTS_JS) == [[CHECKPOINT_GROUP, ["0"]]]

        # a ledger's history is a state too: the link pasted elsewhere reopens the same view
        page.eval("history.go(-2)")
        page.wait_for("document.querySelector('tr[data-group=history] .history-open') !== null && "
                      f"new URLSearchParams(location.search).get('hub') === {json.dumps(view_stack.hub)}")
        page.eval("document.querySelector('tr[data-group=history] .history-open').click()")
        page.wait_for("document.querySelectorAll('#history tr.history-row').length > 0")
        shared = page.eval("location.href")
        assert "history_group=history" in shared and "history_partition=1" in shared
        page.goto("about:blank")
        page.goto(shared)
        page.wait_for("document.querySelectorAll('#history tr.history-row').length > 0 && "
                      "document.querySelectorAll('#producers tr.producer-row').length > 0")
        assert page.eval("location.href") == shared
        assert page.eval("document.querySelector('#hubs a.selected').dataset.hub") == view_stack.hub
        assert page.eval("Array.from(document.querySelectorAll('#history tr.history-row')).map(r => r.dataset.ordinal)") == [
            str(o) for o in reversed(range(HISTORY_BATCHES))]
        page.screenshot(tmp_path / "eventhubs-view-found.png")
    finally:
        if page is not None:
            page.close()
        browser.stop()


@pytest.mark.requires("chromium")
def test_browser_logs_in_and_sees_producers_lag_and_dead_letters(view_stack: ViewStack, tmp_path: Path) -> None:
    from cdp import Chromium

    base = view_stack.airflow.base
    browser = Chromium(tmp_path / "chromium")
    page = None
    try:
        page = browser.page()
        _log_in(page, view_stack)
        query = "&".join(f"{k}={v}" for k, v in {**view_stack.params, "consumer_groups": "analytics,$Default",
                                                  "pending_threshold_seconds": "1"}.items())
        page.goto(f"{base}/eventhubs/?{query}")
        page.wait_for("document.querySelectorAll('#producers tr.producer-row').length > 0")
        rows = page.eval(
            "Array.from(document.querySelectorAll('#producers tr.producer-row')).map(r => [r.dataset.group, "
            "r.dataset.partition, r.querySelector('.next-seq') ? r.querySelector('.next-seq').textContent : null, "
            "r.querySelector('.open-batches').textContent])"
        )
        published = {r[1]: r for r in rows if r[0] == f"{DAG_ID}.publish"}
        assert sorted(published) == [str(p) for p in range(PARTITIONS)]
        assert all(int(r[2]) == DAG_EVENTS // PARTITIONS for r in published.values())
        (pending,) = [r for r in rows if r[0] == "backfill"]
        assert pending[1] == "3" and pending[3].startswith("pending 5 events")
        assert page.eval("document.querySelector('.last-batch a.ti-link').textContent").startswith(f"{DAG_ID}.publish")
        # the killed publishes' pending and partial batches are older than the one-second threshold: in red
        stale = page.eval("Array.from(document.querySelectorAll('.open-batch.stale')).map(b => [b.dataset.kind, "
                          "getComputedStyle(b).color, b.closest('tr').dataset.group])")
        assert sorted(stale) == [["partial", "rgb(180, 35, 24)", "replay"], ["pending", "rgb(180, 35, 24)", "backfill"]]
        partial = page.eval("document.querySelector('tr[data-group=replay] .open-batches').textContent")
        assert partial.startswith(f"partial 0 of {REPLAY_PARTIAL_EVENTS} events landed")
        # a ledger's history opens under the table; its batches are listed newest first
        page.eval("document.querySelector('tr[data-group=history] .history-open').click()")
        page.wait_for("document.querySelectorAll('#history tr.history-row').length > 0")
        ordinals = page.eval("Array.from(document.querySelectorAll('#history tr.history-row')).map(r => r.dataset.ordinal)")
        assert ordinals == [str(o) for o in reversed(range(HISTORY_BATCHES))]

        lag = page.eval(
            "Array.from(document.querySelectorAll('.lag-chart[data-group=analytics] .bar')).map(b => "
            "[b.dataset.partition, Number(b.dataset.lag), b.getBoundingClientRect().width])"
        )
        assert [(p, n) for p, n, _ in lag] == [(str(p), DAG_EVENTS // PARTITIONS) for p in range(PARTITIONS)]
        assert all(width > 50 for _, _, width in lag)  # drawn bars, not empty boxes
        assert page.eval("Array.from(document.querySelectorAll('.lag-chart[data-group=\"$Default\"] .bar'))"
                         ".every(b => b.getBoundingClientRect().width === 0)")
        dead = page.eval("Array.from(document.querySelectorAll('#dead-letters tr.dl-row')).map(r => [r.dataset.reason, "
                         "r.querySelector('.dl-count').textContent])")
        assert dead == [["rejected", "2"]]
        replay = page.eval("document.getElementById('replay-command').textContent")
        assert replay.startswith("python -m airflow_provider_eh.ingest --sql-conn-id sink_view") and replay.endswith(" replay")
        assert page.eval("!document.getElementById('dead-letters-section').hidden")
        rows_js = "Array.from(document.querySelectorAll('.lag-chart[data-group=analytics] .bar-row'))"
        page.wait_for(f"{rows_js}.every(r => !r.textContent.includes('age unknown'))", timeout=60)  # filled in on refresh
        texts = page.eval(f"{rows_js}.map(r => r.textContent)")
        assert len(texts) == PARTITIONS and all("events, " in t and "age unknown" not in t for t in texts), texts
        read_at = "document.querySelector('#consumers-read-at time').getAttribute('datetime')"
        before = page.eval(read_at)
        page.wait_for(f"{read_at} !== {json.dumps(before)}", timeout=30)
        shot = page.screenshot(tmp_path / "eventhubs-view.png")
        assert shot.stat().st_size > 10_000

        # the task instance link starts at Airflow's sub-path and opens that task instance in Airflow's UI
        (run,) = view_stack.airflow.runs(DAG_ID)
        href = page.eval("document.querySelector('.last-batch a.ti-link').getAttribute('href')")
        assert href == f"{BASE_PATH}/dags/{DAG_ID}/runs/{quote(run['dag_run_id'], safe='')}/tasks/publish"
        page.goto(view_stack.airflow.origin + href)
        page.wait_for("document.body.innerText.includes('Rendered Templates') && location.pathname.endsWith('/tasks/publish')")
        # the page's frame comes first, the task instance when Airflow's API answers ("No Task Instance found" till then)
        page.wait_for("document.body.innerText.includes('AuditedPublishOperator') || "
                      "document.body.innerText.includes('Page Not Found')", timeout=60)
        assert "Page Not Found" not in page.text() and page.eval("location.pathname") == href
        assert run["dag_run_id"] in page.text() and "AuditedPublishOperator" in page.text()
        page.screenshot(tmp_path / "task-instance.png")

        # the page is in Airflow's navigation: the UI lists it and embeds it
        page.goto(f"{base}/plugin/eventhubs")
        page.wait_for(f"document.querySelector('iframe[src^=\"{BASE_PATH}/eventhubs/\"]') !== null")
        # the embedded page restores the settings and reads the same hub
        page.wait_for("(() => { const d = document.querySelector('iframe[src*=\"/eventhubs/\"]').contentDocument;"
                      " return d && d.querySelectorAll('#producers tr.producer-row').length > 0; })()")
        page.screenshot(tmp_path / "eventhubs-in-airflow.png")
    finally:
        if page is not None:
            page.close()
        browser.stop()


def test_view_enabled_false_removes_the_routes_the_menu_entry_and_the_tab(monkeypatch: pytest.MonkeyPatch) -> None:
    # Airflow's own plugin loading and mounting (init_plugins is what the API server runs), switched off then on
    from fastapi import FastAPI

    from airflow import plugins_manager
    from airflow.api_fastapi.app import init_plugins

    caches = (plugins_manager._get_plugins, plugins_manager.get_fastapi_plugins, plugins_manager._get_ui_plugins)
    results = {}
    try:
        for enabled in ("False", "True"):
            monkeypatch.setenv("AIRFLOW__AZURE_EVENT_HUBS__VIEW_ENABLED", enabled)
            for cached in caches:
                cached.cache_clear()
            app = FastAPI()
            init_plugins(app)
            results[enabled] = {
                "mounted": "/eventhubs" in [getattr(route, "path", "") for route in app.routes],
                "views": [(view["href"], view["destination"]) for view in plugins_manager._get_ui_plugins()[0]
                          if view["href"].startswith("/eventhubs")],
            }
    finally:
        for cached in caches:
            cached.cache_clear()
    assert results["True"] == {"mounted": True, "views": [  # the page in the navigation, the tab on task instance pages
        ("/eventhubs/", "nav"), ("/eventhubs/tab?dag_id={DAG_ID}&run_id={RUN_ID}&task_id={TASK_ID}&map_index={MAP_INDEX}",
                                 "task_instance")]}
    assert results["False"] == {"mounted": False, "views": []}


# -- trends: lag samples kept in blobs, and the publish volume from the ledgers' history -----------------------

TREND_RETENTION = timedelta(hours=2)
TREND_STEPS = 19  # samples 10 minutes apart over 3 h, 5 s into their minute: the 2-hour retention keeps the last 12
TREND_KEPT = 12


def _trend_source(view_stack: ViewStack) -> Source:
    return Source("eh_view", view_stack.hub, "wasb_view", view_stack.state_container, view_stack.checkpoint_container)


@pytest.fixture(scope="module")
def trend_samples(view_stack: ViewStack) -> Iterator[dict]:
    """Lag samples of the stack's real checkpoints, written by the view's sampler in this process at 19 moments
    10 minutes apart over the last 3 hours (the time passed in), two samplers at once for the first; with a
    2-hour retention. Yields what each write returned and the sample store."""
    with pytest.MonkeyPatch.context() as mp:  # the view's reads resolve the stack's connections in this process
        mp.setenv("AIRFLOW_CONN_EH_VIEW", json.dumps({"conn_type": "azure_event_hubs",
                                                      "extra": {"connection_string": view_stack.eh_conn_str}}))
        mp.setenv("AIRFLOW_CONN_WASB_VIEW", json.dumps({"conn_type": "wasb",
                                                        "extra": {"connection_string": view_stack.blob_conn_str}}))
        settings = SamplingSettings(enabled=True, interval=60.0, retention=TREND_RETENTION)
        source = _trend_source(view_stack)
        now = datetime.now(UTC)
        moments = [bucket_start(now - timedelta(hours=3), 60) + timedelta(minutes=10 * k, seconds=5) for k in range(TREND_STEPS)]
        with ThreadPoolExecutor(2) as pool:  # two API servers sampling the same bucket at once
            raced = list(pool.map(lambda _: sample(source, settings, moments[0]), range(2)))
        again = sample(source, settings, moments[0] + timedelta(seconds=30))  # later in the same bucket
        written = [sample(source, settings, moment) for moment in moments[1:]]
        container = BlobServiceClient.from_connection_string(view_stack.blob_conn_str).get_container_client(
            view_stack.checkpoint_container)
        endpoint = airflow_endpoint(view_stack)
        yield {"raced": raced, "again": again, "written": written, "moments": moments, "settings": settings,
               "store": SampleStore(container, endpoint.namespace, endpoint.eventhub_name)}


def test_samplers_write_each_bucket_once_and_prune_what_is_past_the_retention(view_stack: ViewStack, trend_samples: dict) -> None:
    assert sorted(trend_samples["raced"]) == [False, True] and trend_samples["again"] is False
    assert trend_samples["written"] == [True] * (TREND_STEPS - 1)
    store, moments = trend_samples["store"], trend_samples["moments"]
    names = store.names()
    # bounded: each write pruned the buckets older than the retention at its moment
    assert [m for m in moments if bucket_start(m, 60) >= moments[-1] - TREND_RETENTION] == moments[-TREND_KEPT:]
    assert names == [blob_name(store.namespace, store.hub, bucket_start(m, 60)) for m in moments[-TREND_KEPT:]]
    # a sample holds the lag the view shows: every consumer group with checkpoints, every partition
    token = view_stack.airflow.token("admin")
    consumers = _consumers(view_stack.view("/api/consumers", token).json())
    (latest,) = store.read(bucket_start(moments[-1], 60), bucket_start(moments[-1], 60))
    assert latest.at == moments[-1]
    assert {g: {p: lag for p, (lag, _) in parts.items()} for g, parts in latest.groups.items()} == {
        g: {p: row["lag_events"] for p, row in parts.items()} for g, parts in consumers.items()}
    assert latest.groups["analytics"]["0"][0] == DAG_EVENTS // PARTITIONS


def test_the_sampler_thread_samples_a_watched_hub_at_once_and_stops_cleanly(view_stack: ViewStack, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_EH_VIEW", json.dumps({"conn_type": "azure_event_hubs",
                                                           "extra": {"connection_string": view_stack.eh_conn_str}}))
    monkeypatch.setenv("AIRFLOW_CONN_WASB_VIEW", json.dumps({"conn_type": "wasb",
                                                             "extra": {"connection_string": view_stack.blob_conn_str}}))
    own = f"samples-{uuid.uuid4().hex[:10]}"  # a container of its own (lag_samples_container): the trends' counts stay the fixture's
    container = BlobServiceClient.from_connection_string(view_stack.blob_conn_str).create_container(own)
    sampler = Sampler(SamplingSettings(enabled=True, interval=3600.0, container=own))
    started = datetime.now(UTC)
    sampler.watch(_trend_source(view_stack))
    try:
        deadline = time.monotonic() + 60
        while not list(container.list_blobs(name_starts_with="_samples/")):
            assert time.monotonic() < deadline, "the sampler wrote nothing in 60 s"
            time.sleep(0.2)
    finally:
        sampler.stop()
    assert sampler._thread is not None and not sampler._thread.is_alive()
    (name,) = [b.name for b in container.list_blobs(name_starts_with="_samples/")]
    assert bucket_of(name) == bucket_start(started, 3600) or bucket_of(name) == bucket_start(datetime.now(UTC), 3600)


def _committed_per_group(view_stack: ViewStack) -> dict[str, tuple[int, int]]:
    """Events and batches of every producer group's committed batches, read from the ledgers' history directly."""
    from airflow_provider_eh.plugins.readers.ledgers import producer_state_blobs
    from airflow_provider_eh.publishing.blob_store import BlobProducerStateStore
    from airflow_provider_eh.publishing.document import StateKey

    container = BlobServiceClient.from_connection_string(view_stack.blob_conn_str).get_container_client(view_stack.state_container)
    store, endpoint = BlobProducerStateStore(container), airflow_endpoint(view_stack)
    out: Counter = Counter()
    for group, partition, *_ in producer_state_blobs(container, endpoint.namespace, endpoint.eventhub_name):
        key = StateKey.of(endpoint, group, partition)
        state = store.read(key)
        page = store.history(key, limit=1000, state=state)
        assert page.before is None
        out[state.group, "events"] += sum(b.events for b in page.batches)
        out[state.group, "batches"] += len(page.batches)
    return {g: (out[g, "events"], out[g, "batches"]) for g, kind in out if kind == "events"}


def test_trends_api_returns_the_samples_and_the_events_published_per_group(view_stack: ViewStack, trend_samples: dict) -> None:
    token = view_stack.airflow.token("admin")
    response = view_stack.view("/api/trends", token)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["hub"] == view_stack.hub and body["sampling"]["enabled"] is False  # the stack samples nothing itself
    lag = body["lag"]
    assert lag["samples"] == TREND_KEPT
    kept = {s.at.isoformat(): s for s in trend_samples["store"].read(datetime.now(UTC) - timedelta(hours=24), datetime.now(UTC))}
    assert {g["consumer_group"] for g in lag["consumer_groups"]} == {"analytics", "$default", "backlog"}
    for group in lag["consumer_groups"]:
        assert [p["partition"] for p in group["partitions"]] == [str(p) for p in range(PARTITIONS)]
        for row in group["partitions"]:
            assert [pt[0] for pt in row["points"]] == sorted(kept)  # a point per sample, 10 minutes apart
            assert [pt[1] for pt in row["points"]] == [kept[t].groups[group["consumer_group"]][row["partition"]][0]
                                                       for t in sorted(kept)]
    published = body["published"]
    assert published["complete"] is True
    shown = {g["group"]: (sum(b[1] for b in g["buckets"]), sum(b[2] for b in g["buckets"])) for g in published["producer_groups"]}
    expected = _committed_per_group(view_stack)
    assert shown == expected and expected[f"{DAG_ID}.publish"] == (DAG_EVENTS, PARTITIONS)
    assert expected["history"] == (HISTORY_BATCHES, HISTORY_BATCHES) and shown["backfill"] == (0, 0)  # pending only
    # a shorter window: the samples of the last hour only
    hour = view_stack.view("/api/trends", token, hours=1).json()
    assert hour["lag"]["samples"] == sum(1 for t in kept if bucket_start(datetime.fromisoformat(t), 60) >= _time(hour["since"]))
    assert view_stack.view("/api/trends", token, hours=26).status_code == 422


def test_trends_need_a_user_who_may_read_the_connections_and_never_carry_a_secret(view_stack: ViewStack) -> None:
    assert view_stack.view("/api/trends").status_code == 401
    refused = view_stack.view("/api/trends", view_stack.airflow.token("viewer"))
    assert refused.status_code == 403 and "eh_view" in refused.json()["detail"]
    token = view_stack.airflow.token("admin")
    answers = {
        "trends": view_stack.view("/api/trends", token),
        "refused SAS key": view_stack.view("/api/trends", token, conn_id="eh_refused"),  # the trends read blobs only
        "refused account key": view_stack.view("/api/trends", token, wasb_conn_id="wasb_refused"),
        "charts.js": view_stack.view("/static/charts.js", token),
    }
    assert answers["trends"].status_code == 200 and answers["charts.js"].status_code == 200
    assert answers["refused SAS key"].status_code == 200 and answers["refused account key"].status_code == 400
    secrets = {**KEYS, **{f"{n}, decoded": base64.b64decode(KEYS[n]).decode() for n in ("account key", "refused account key")}}
    for name, answer in answers.items():
        for secret_name, secret in secrets.items():
            assert secret not in answer.text, f"the {secret_name} is in the answer to {name}"


@pytest.mark.requires("chromium")
def test_browser_charts_hold_the_lag_samples_and_the_publish_volume(view_stack: ViewStack, trend_samples: dict,
                                                                    tmp_path: Path) -> None:
    from cdp import Chromium

    base = view_stack.airflow.base
    browser = Chromium(tmp_path / "chromium")
    page = None
    try:
        page = browser.page()
        page.goto(f"{base}/auth/login")
        page.wait_for("document.querySelector('input[name=username]') !== null")
        page.type("input[name=username]", "admin")
        page.type("input[name=password]", view_stack.airflow.passwords["admin"])
        page.click("button[type=submit]")
        page.wait_for("document.cookie.includes('_token=')")
        page.goto(f"{base}/eventhubs/?" + "&".join(f"{k}={v}" for k, v in view_stack.params.items()))
        page.wait_for("document.querySelectorAll('.trend-lag polyline.lag-line').length > 0 && "
                      "document.querySelectorAll('.trend-published rect.volume-bar').length > 0")
        lines = page.eval("Array.from(document.querySelectorAll('.trend-lag polyline.lag-line')).map(l => "
                          "[l.closest('.trend-lag').dataset.group, l.dataset.partition, l.points.numberOfItems, "
                          "l.getBoundingClientRect().width])")
        assert sorted((g, p) for g, p, _, _ in lines) == sorted(
            (g, str(p)) for g in ("analytics", "$default", "backlog") for p in range(PARTITIONS))
        assert all(n == TREND_KEPT for _, _, n, _ in lines)  # a point per sample the test produced
        assert all(width > 20 for _, _, _, width in lines)  # drawn across the window's last 2 hours
        # a lagging group's line is above a caught-up group's (SVG's y grows downwards)
        tops = dict(page.eval("Array.from(document.querySelectorAll('.trend-lag')).map(c => [c.dataset.group, "
                              "Math.min(...Array.from(c.querySelectorAll('polyline')).map(l => l.getBBox().y))])"))
        assert tops["analytics"] < tops["$default"]
        bars = page.eval("Array.from(document.querySelectorAll('.trend-published rect.volume-bar')).map(b => "
                         "[b.closest('.trend-published').dataset.group, Number(b.dataset.events), Number(b.dataset.batches), "
                         "b.getBoundingClientRect().height])")
        drawn: Counter = Counter()
        for group, events, batches, height in bars:
            drawn[group, "events"] += events
            drawn[group, "batches"] += batches
            assert height > 0
        assert {g: (drawn[g, "events"], drawn[g, "batches"]) for g, kind in drawn if kind == "events"} == {
            g: n for g, n in _committed_per_group(view_stack).items() if n != (0, 0)}
        page.eval("document.getElementById('trends-section').scrollIntoView()")  # the charts in the picture
        shot = page.screenshot(tmp_path / "eventhubs-trends.png")
        assert shot.stat().st_size > 10_000
    finally:
        if page is not None:
            page.close()
        browser.stop()
