"""The Event Hubs tab on Airflow's task-instance pages, through the running ``airflow standalone`` of ``view_stack``:
its API for a publish, a checkpoint sensor, an ingest task and a plain task, its access rules, what it never
discloses, and the tab in Airflow's own UI in Chromium.

``test_view.py`` imports these tests, so that they run on its module's ``view_stack`` (one Airflow for both).
"""

from __future__ import annotations

import base64
import json
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from ui_kit import (
    DAG_EVENTS,
    DAG_ID,
    INGEST_GROUP,
    KEYS,
    MARK,
    PARTITIONS,
    VARIABLES_DAG_ID,
    VARIABLES_EVENTS,
    VARIABLES_PARTITIONS,
    ViewStack,
)

TASKS = ("publish", "ingest", "wait_for_ingest", "report")


def _tab(view_stack: ViewStack, token: str | None, task_id: str, dag_id: str = DAG_ID, **params: Any) -> httpx.Response:
    (run,) = view_stack.airflow.runs(dag_id)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    query = {"dag_id": dag_id, "run_id": run["dag_run_id"], "task_id": task_id, **params}
    return httpx.get(f"{view_stack.airflow.base}/eventhubs/api/task-instance", params=query, headers=headers, timeout=120)


def _xcom(view_stack: ViewStack, task_id: str, dag_id: str = DAG_ID) -> Any:
    (run,) = view_stack.airflow.runs(dag_id)
    response = view_stack.airflow.get(f"/dags/{dag_id}/dagRuns/{run['dag_run_id']}/taskInstances/{task_id}/xcomEntries/return_value")
    assert response.status_code == 200, response.text
    value = response.json()["value"]
    return json.loads(value) if isinstance(value, str) else value


def _sink_counts(view_stack: ViewStack) -> tuple[Counter, Counter]:
    """Rows and dead letters per partition in the DAG's sink, as its tables hold them."""
    with sqlite3.connect(view_stack.dag_sink_db) as conn:
        rows = Counter(p for (p,) in conn.execute("SELECT partition_id FROM events"))
        dead = Counter(p for (p,) in conn.execute(
            "SELECT partition_id FROM eh_ingest_dead_letter WHERE consumer_group = ?", (INGEST_GROUP,)))
    return rows, dead


def test_tab_api_shows_the_publish_the_sensor_and_the_ingest_of_the_run(view_stack: ViewStack) -> None:
    token = view_stack.airflow.token("admin")
    answers = {task_id: _tab(view_stack, token, task_id) for task_id in TASKS}
    assert all(a.status_code == 200 for a in answers.values()), {t: a.text for t, a in answers.items()}
    body = {task_id: a.json() for task_id, a in answers.items()}

    # the publish: per partition what its task returned, beside its batch's entry in the ledger
    returned = _xcom(view_stack, "publish")
    publish = body["publish"]
    assert (publish["kind"], publish["operator"], publish["state"]) == ("publish", "AuditedPublishOperator", "success")
    tab = publish["publish"]
    assert tab["producer_group"] == f"{DAG_ID}.publish" and tab["generation"] == 1 and tab["events"] == DAG_EVENTS
    rows = {r["partition"]: r for r in tab["partitions"]}
    assert sorted(rows) == sorted(returned) == [str(p) for p in range(PARTITIONS)]
    for pid, result in returned.items():
        row = rows[pid]
        assert {k: row[k] for k in result} == result  # status, events, range, fence, recovery counts as returned
        assert (row["status"], row["events"], row["landed"], row["resent"]) == ("published", DAG_EVENTS // PARTITIONS, 0, 0)
        ledger = row["ledger"]
        assert ledger["state"] == "committed" and ledger["try_number"] == 1 and ledger["ordinal"] == 0
        assert (ledger["events"], ledger["first_seq"], ledger["last_seq"]) == (result["events"], result["first_seq"], result["last_seq"])
        assert ledger["fencing"] == result["fencing"] == "hub"
        assert f"history_group={quote(tab['producer_group'])}&history_partition={pid}" in row["ledger_link"]
        assert row["ledger_link"].startswith("/airflow/eventhubs/?conn_id=eh_view&hub=")
    # the ledger link opens the view at that ledger's history: the same batch, found by the view's own API
    (batch,) = view_stack.view("/api/history", token, group=tab["producer_group"], partition="0").json()["batches"]
    assert batch["ordinal"] == rows["0"]["ledger"]["ordinal"] and batch["committed_at"] == rows["0"]["ledger"]["committed_at"]

    # the ingest: rows, dead letters and checkpoints per partition, as its sink's tables hold them
    in_sink, dead_in_sink = _sink_counts(view_stack)
    ingest = body["ingest"]["ingest"]
    assert body["ingest"]["kind"] == "ingest" and ingest["consumer_group"] == INGEST_GROUP
    by_partition = {r["partition"]: r for r in ingest["partitions"]}
    assert sorted(by_partition) == [str(p) for p in range(PARTITIONS)]
    for pid, row in by_partition.items():
        assert row["rows"] == in_sink[pid] and row["dead_letters"] == dead_in_sink[pid]
        assert row["events"] == row["rows"] + row["dead_letters"] + row["duplicates"]
        assert row["checkpoint"] == row["target"] >= returned[pid]["service_last_sequence_number"]
    assert ingest["totals"]["rows"] == sum(in_sink.values()) and ingest["totals"]["dead_letters"] == 2 == sum(dead_in_sink.values())
    assert in_sink["0"] > DAG_EVENTS // PARTITIONS  # more than the DAG's own events: the hub's earlier ones too

    # the sensor: the group's checkpoint against the publish's result, per partition
    sensor = body["wait_for_ingest"]["checkpoint_sensor"]
    assert body["wait_for_ingest"]["kind"] == "checkpoint_sensor" and sensor["consumer_groups"] == [INGEST_GROUP]
    assert sensor["reached"] is True and sensor["container"] == f"dag-{view_stack.checkpoint_container}"
    progress = {(r["consumer_group"], r["partition"]): r for r in sensor["partitions"]}
    assert sorted(progress) == [(INGEST_GROUP, str(p)) for p in range(PARTITIONS)]
    for pid, result in returned.items():
        row = progress[(INGEST_GROUP, pid)]
        assert row["target"] == result["service_last_sequence_number"]
        assert row["checkpoint"] == by_partition[pid]["checkpoint"] and row["remaining"] == 0 and row["reached"]
    assert sensor["returned"] == {INGEST_GROUP: {pid: by_partition[pid]["checkpoint"] for pid in by_partition}}

    # any other task: said plainly
    other = body["report"]
    assert other["kind"] is None and "nothing to show" in other["message"]
    assert not {"publish", "ingest", "checkpoint_sensor"} & set(other)


def test_tab_shows_a_publish_on_the_variables_backend_with_its_ledger_entries(view_stack: ViewStack) -> None:
    token = view_stack.airflow.token("admin")
    answer = _tab(view_stack, token, "publish", dag_id=VARIABLES_DAG_ID)
    assert answer.status_code == 200, answer.text
    tab = answer.json()["publish"]
    returned = _xcom(view_stack, "publish", dag_id=VARIABLES_DAG_ID)
    assert tab["state_backend"] == "variable" and tab["producer_group"] == f"{VARIABLES_DAG_ID}.publish"
    assert tab["hub"] == view_stack.variables_hub and tab["events"] == VARIABLES_EVENTS
    rows = {r["partition"]: r for r in tab["partitions"]}
    assert sorted(rows) == sorted(returned) == [str(p) for p in range(VARIABLES_PARTITIONS)]
    for pid, result in returned.items():
        ledger = rows[pid]["ledger"]
        assert ledger["state"] == "committed" and ledger["try_number"] == 1
        assert (ledger["events"], ledger["first_seq"], ledger["last_seq"]) == (result["events"], result["first_seq"], result["last_seq"])
        link = rows[pid]["ledger_link"]
        assert f"history_group={quote(tab['producer_group'])}&history_partition={pid}&history_backend=variable" in link
        assert "state_container" not in link
        (batch,) = view_stack.view("/api/history", token, group=tab["producer_group"], partition=pid, backend="variable",
                                   hub=view_stack.variables_hub).json()["batches"]
        assert batch["ordinal"] == ledger["ordinal"] and batch["committed_at"] == ledger["committed_at"]


def test_tab_refuses_anonymous_401_and_a_user_without_connection_access_403(view_stack: ViewStack) -> None:
    base = f"{view_stack.airflow.base}/eventhubs"
    for path in ("/tab", "/tab/static/tab.js"):
        assert httpx.get(base + path, timeout=30).status_code == 401, path
    for task_id in TASKS:
        assert _tab(view_stack, None, task_id).status_code == 401, task_id
        assert _tab(view_stack, "not-a-token", task_id).status_code in (401, 403), task_id
    viewer = view_stack.airflow.token("viewer")
    for task_id in ("publish", "ingest", "wait_for_ingest"):  # the viewer role may read the DAG, not the connections
        refused = _tab(view_stack, viewer, task_id)
        assert refused.status_code == 403, refused.text
        assert "'eh_view'" in refused.json()["detail"]
    assert _tab(view_stack, viewer, "report").json()["kind"] is None  # names no connection: nothing to refuse
    missing = _tab(view_stack, view_stack.airflow.token("admin"), "no_such_task")
    assert missing.status_code == 404 and "'no_such_task'" in missing.json()["detail"]


def test_tab_refuses_a_user_who_may_not_read_the_dag(monkeypatch: pytest.MonkeyPatch) -> None:
    # the auth manager's answer is all that decides: one that refuses the DAG's task instances (the simple auth
    # manager has no such role), on the view's own app
    from fastapi.testclient import TestClient

    import airflow.api_fastapi.app as airflow_app
    from airflow.api_fastapi.core_api.security import get_user
    from airflow_provider_eh.plugins.app import create_app

    asked: list[tuple[str, str]] = []

    class NoDags:
        def is_authorized_dag(self, *, method: str, access_entity: Any, details: Any, user: Any) -> bool:
            asked.append((details.id, str(access_entity)))
            return False

    monkeypatch.setattr(airflow_app, "get_auth_manager", lambda: NoDags())
    app = create_app()
    app.dependency_overrides[get_user] = lambda: object()
    response = TestClient(app).get("/api/task-instance", params={"dag_id": "secret_dag", "run_id": "r", "task_id": "t"})
    assert response.status_code == 403 and "'secret_dag'" in response.json()["detail"]
    assert asked == [("secret_dag", "DagAccessEntity.TASK_INSTANCE")]


def test_no_secret_reaches_a_tab_answer(view_stack: ViewStack) -> None:
    token = view_stack.airflow.token("admin")
    answers = {task_id: _tab(view_stack, token, task_id) for task_id in TASKS}
    answers["page"] = httpx.get(f"{view_stack.airflow.base}/eventhubs/tab", headers={"Authorization": f"Bearer {token}"})
    answers["script"] = httpx.get(f"{view_stack.airflow.base}/eventhubs/tab/static/tab.js",
                                  headers={"Authorization": f"Bearer {token}"})
    answers["viewer"] = _tab(view_stack, view_stack.airflow.token("viewer"), "publish")
    assert all(a.status_code in (200, 403) for a in answers.values())
    secrets = dict(KEYS)
    for name in ("account key", "refused account key"):
        secrets[f"{name}, decoded"] = base64.b64decode(KEYS[name]).decode()
    for name, answer in answers.items():
        for secret_name, secret in secrets.items():
            assert secret not in answer.text, f"the {secret_name} is in the answer to {name}"
        assert MARK not in answer.text, name


@pytest.mark.requires("chromium")
def test_browser_finds_the_tab_on_each_kind_of_task_instance_page(view_stack: ViewStack, tmp_path: Path) -> None:
    from cdp import Chromium

    base = view_stack.airflow.base
    (run,) = view_stack.airflow.runs(DAG_ID)
    returned = _xcom(view_stack, "publish")
    in_sink, dead_in_sink = _sink_counts(view_stack)
    browser = Chromium(tmp_path / "chromium")
    page = None
    frame = "document.querySelector('iframe[src*=\"/eventhubs/tab?\"]')"
    inside = f"{frame}.contentDocument"

    def open_tab(task_id: str) -> None:
        page.goto(f"{base}/dags/{DAG_ID}/runs/{quote(run['dag_run_id'], safe='')}/tasks/{task_id}")
        # Airflow's own tab bar on the task instance page holds the provider's tab
        page.wait_for("Array.from(document.querySelectorAll('a')).some(a => a.textContent.trim() === 'Event Hubs' "
                      "&& (a.getAttribute('href') || '').endsWith('/plugin/eventhubs-tab'))")
        page.eval("Array.from(document.querySelectorAll('a')).find(a => a.textContent.trim() === 'Event Hubs' "
                  "&& (a.getAttribute('href') || '').endsWith('/plugin/eventhubs-tab')).click()")
        page.wait_for(f"{frame} !== null && {inside} && {inside}.body && {inside}.body.dataset.loaded === 'true'")

    def cells(selector: str, *columns: str) -> list[list[str]]:
        return page.eval(f"Array.from({inside}.querySelectorAll({json.dumps(selector)})).map(r => [r.dataset.partition, "
                         + ", ".join(f"r.querySelector({json.dumps(c)}).textContent" for c in columns) + "])")

    try:
        page = browser.page()
        page.goto(f"{base}/auth/login")
        page.wait_for("document.querySelector('input[name=username]') !== null")
        page.type("input[name=username]", "admin")
        page.type("input[name=password]", view_stack.airflow.passwords["admin"])
        page.click("button[type=submit]")
        page.wait_for("document.cookie.includes('_token=')")

        open_tab("publish")
        shown = cells("#publish tr.partition-row", ".status", ".events", ".seq-range", ".fence", ".ledger")
        assert [r[0] for r in shown] == [str(p) for p in range(PARTITIONS)]
        for pid, status, events, seq_range, fence, ledger in shown:
            result = returned[pid]
            assert (status, int(events)) == ("published", result["events"])
            assert seq_range == f"{result['first_seq']} – {result['last_seq']}" and fence == "hub"
            assert ledger.startswith("committed #0") and "try 1" in ledger
            assert re.search(r"committed #0 (just now|\d+ (s|min|h) ago), try 1", ledger), ledger  # relative
        hover = page.eval(f"{inside}.querySelector('#publish tr.partition-row .ledger time').title")
        assert re.match(r"\d{4}-\d\d-\d\dT.*\nUTC: .*\nlocal: ", hover), hover  # the exact time on hover
        assert page.eval(f"{inside}.querySelector('a.ledger-link').getAttribute('href')").startswith("/airflow/eventhubs/?")
        assert f"published {DAG_EVENTS} events" in page.eval(f"{inside}.getElementById('summary').textContent")
        page.screenshot(tmp_path / "eventhubs-tab.png")

        open_tab("ingest")
        shown = cells("#ingest tr.ingest-row", ".rows", ".dead-letters", ".checkpoint")
        assert {r[0]: (int(r[1]), int(r[2])) for r in shown} == {
            str(p): (in_sink[str(p)], dead_in_sink[str(p)]) for p in range(PARTITIONS)}
        summary = page.eval(f"{inside}.getElementById('summary').textContent")
        assert f"{sum(in_sink.values())} rows written, 2 dead letters" in summary

        open_tab("wait_for_ingest")
        shown = page.eval(f"Array.from({inside}.querySelectorAll('#sensor tr.progress-row')).map(r => [r.dataset.group, "
                          "r.dataset.partition, r.querySelector('.target').textContent, r.querySelector('.checkpoint').textContent, "
                          "r.querySelector('.reached') !== null])")
        assert [(g, p, int(t), reached) for g, p, t, _, reached in shown] == [
            (INGEST_GROUP, str(p), returned[str(p)]["service_last_sequence_number"], True) for p in range(PARTITIONS)]
        assert all(int(c) >= int(t) for _, _, t, c, _ in shown)

        open_tab("report")
        assert "nothing to show" in page.eval(f"{inside}.getElementById('status').textContent")
        assert page.eval(f"{inside}.body.dataset.kind") == "none"
    finally:
        if page is not None:
            page.close()
        browser.stop()
