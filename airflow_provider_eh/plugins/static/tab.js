// The Event Hubs tab of a task instance page: reads /eventhubs/api/task-instance for the task instance in the query.
(function () {
  "use strict";
  var F = window.EventHubsFormat;
  var VIEW = document.querySelector("meta[name=view-base]").content;
  var statusLine = document.getElementById("status");

  // Airflow 3.1 puts the ids in raw, later releases URL-encoded: split by hand, so a "+" stays a "+".
  function queryValues() {
    var out = {};
    location.search.replace(/^\?/, "").split("&").forEach(function (pair) {
      if (!pair) return;
      var at = pair.indexOf("=");
      var key = at < 0 ? pair : pair.slice(0, at), value = at < 0 ? "" : pair.slice(at + 1);
      try { out[decodeURIComponent(key)] = decodeURIComponent(value); } catch (e) { out[key] = value; }
    });
    if (!/^-?\d+$/.test(out.map_index || "")) out.map_index = "-1";  // "{MAP_INDEX}" left as is: not mapped
    return out;
  }

  var el = window.EventHubsDom.el;

  function num(n) { return n === null || n === undefined ? "–" : F.number(n); }
  function cell(value, className) { return el("td", {className: className || "num", text: value}); }

  function link(href, text, className) { return el("a", {href: href, className: className || "", text: text}); }

  function showPublish(p) {
    var body = document.querySelector("#publish tbody");
    p.partitions.forEach(function (r) {
      var l = r.ledger || {};
      var ledger = el("td", {className: "ledger ledger-" + l.state});
      if (l.state === "committed") {
        ledger.appendChild(el("span", {text: "committed #" + l.ordinal + " "}));
        ledger.appendChild(el("time", {className: "muted", datetime: l.committed_at || "", title: F.exact(l.committed_at) || "",
          text: F.relative(l.committed_at) + (l.try_number ? ", try " + l.try_number : "")}));
      } else if (l.state === "pending" || l.state === "partial") {
        ledger.appendChild(el("span", {className: "bad", text: l.state + (l.state === "partial" ? " " + l.landed + " of " + l.events + " landed" : " " + l.events + " events")}));
      } else {
        ledger.appendChild(el("span", {className: "muted", text: l.state === "not read" ? "Variables backend: not read" : "not in the ledger"}));
      }
      if (r.ledger_link) { ledger.appendChild(document.createTextNode(" ")); ledger.appendChild(link(r.ledger_link, "history", "ledger-link")); }
      var recovery = r.status === "recovered"
        ? num(r.landed) + " found landed, " + num(r.resent) + " resent" + (r.readback_seconds !== null ? " (read-back " + r.readback_seconds + " s)" : "")
        : r.status === "already_committed" ? "committed before: nothing sent" : r.status ? "none needed" : "";
      var range = r.first_seq === null || r.first_seq === undefined || !r.events ? "–" : num(r.first_seq) + " – " + num(r.last_seq);
      body.appendChild(el("tr", {className: "partition-row", "data-partition": r.partition}, [
        cell(r.partition, ""), cell(r.status || (l.state === "committed" ? "committed" : "no result"), "status"),
        cell(num(r.events !== null && r.events !== undefined ? r.events : l.events), "num events"),
        cell(range, "seq-range"),
        cell(r.fencing ? r.fencing + (r.lease_only_batch_bytes ? " (batches ≤ " + num(r.lease_only_batch_bytes) + " B)" : "") : "–", "fence"),
        cell(recovery, "recovery"), ledger,
      ]));
    });
    document.getElementById("summary").textContent = "Producer group " + p.producer_group + " published " + num(p.events) +
      " events to hub " + (p.hub || "?") + (p.batch_id ? " as batch " + p.batch_id.slice(0, 16) + "…" : "") +
      (p.returned ? "" : " (the task returned no result: the ledger shows where its batch stands)");
    document.getElementById("publish-section").hidden = false;
  }

  function showSensor(s) {
    var body = document.querySelector("#sensor tbody");
    s.partitions.forEach(function (r) {
      var done = r.target < 0 ? 1 : Math.max(0, Math.min(1, ((r.checkpoint === null ? -1 : r.checkpoint) + 1) / (r.target + 1)));
      body.appendChild(el("tr", {className: "progress-row", "data-group": r.consumer_group, "data-partition": r.partition}, [
        cell(r.consumer_group, ""), cell(r.partition, ""), cell(num(r.checkpoint), "num checkpoint"), cell(num(r.target), "num target"),
        cell(num(r.remaining), "num remaining " + (r.reached ? "ok" : "warn")),
        el("td", {}, [el("span", {className: "bar", title: Math.round(done * 100) + "%"}, [el("span", {style: "width:" + (done * 100) + "%"})]),
          el("span", {className: r.reached ? "ok reached" : "warn", text: r.reached ? " reached" : " waiting"})]),
        cell(num(r.last_enqueued), "num"),
      ]));
    });
    document.getElementById("summary").textContent = "Hub " + s.hub + ", checkpoints in container " + s.container + ", targets: " +
      s.targets_from + ". " + (s.reached ? "Every group has reached its target." : "Not every group has reached its target yet.") +
      (s.groups_without_checkpoints.length ? " No checkpoint yet: " + s.groups_without_checkpoints.join(", ") + "." : "");
    document.getElementById("sensor-section").hidden = false;
    document.getElementById("links").appendChild(link(s.view_link, "Consumer groups in the Event Hubs view", "view-link"));
  }

  function showIngest(g) {
    var body = document.querySelector("#ingest tbody");
    g.partitions.forEach(function (r) {
      body.appendChild(el("tr", {className: "ingest-row", "data-partition": r.partition}, [
        cell(r.partition, ""), cell(num(r.start), "num start"), cell(num(r.checkpoint), "num checkpoint"), cell(num(r.target), "num target"),
        cell(num(r.events), "num events"), cell(num(r.rows), "num rows"), cell(num(r.duplicates), "num duplicates"),
        cell(num(r.dead_letters), "num dead-letters" + (r.dead_letters ? " bad" : "")), cell(num(r.batches), "num batches"),
      ]));
    });
    var t = g.totals;
    document.getElementById("summary").textContent = g.returned
      ? "Consumer group " + g.consumer_group + " into table " + g.table + ": " + num(t.rows) + " rows written, " + num(t.dead_letters) +
        " dead letters, " + num(t.duplicates) + " duplicates skipped, from " + num(t.events) + " events in " + num(t.batches) + " transactions."
      : "The task returned no result (not run, running or failed): nothing to count yet.";
    document.getElementById("ingest-section").hidden = g.partitions.length === 0;
    document.getElementById("links").appendChild(link(g.view_link, "Consumer lag and dead letters in the Event Hubs view", "view-link"));
  }

  var q = queryValues();
  var params = ["dag_id", "run_id", "task_id", "map_index"].map(function (k) {
    return encodeURIComponent(k) + "=" + encodeURIComponent(q[k] || "");
  }).join("&");
  fetch(VIEW + "api/task-instance?" + params, {credentials: "same-origin"}).then(function (r) {
    return r.json().then(function (body) {
      if (!r.ok) throw new Error(r.status + ": " + (body.detail || JSON.stringify(body)));
      return body;
    });
  }).then(function (data) {
    document.body.dataset.kind = data.kind || "none";
    statusLine.textContent = data.message || (data.operator + " " + data.task_id + (data.map_index >= 0 ? " [" + data.map_index + "]" : "") +
      ", try " + data.try_number + ", " + (data.state || "no state"));
    document.getElementById("summary").hidden = !data.kind;
    if (data.kind === "publish") showPublish(data.publish);
    else if (data.kind === "checkpoint_sensor") showSensor(data.checkpoint_sensor);
    else if (data.kind === "ingest") showIngest(data.ingest);
    document.body.dataset.loaded = "true";
  }).catch(function (e) {
    statusLine.textContent = String(e.message || e);
    statusLine.className = "error";
    document.body.dataset.loaded = "error";
  });
})();
