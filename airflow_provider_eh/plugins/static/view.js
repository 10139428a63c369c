// The Event Hubs view: reads the JSON API next to this page and renders it; consumer lag refreshes every few seconds.
// URLs start at the paths the server put in the page's <meta> tags, so Airflow may be served under a sub-path.
(function () {
  "use strict";
  var FIELDS = ["conn_id", "hub", "wasb_conn_id", "state_container", "checkpoint_container", "consumer_groups",
                "sql_conn_id", "sink_consumer_group", "lag_consumer_group", "pending_threshold_seconds"];
  var STORE = "eventhubs-view-settings";
  var REFRESH_MS = 5000;
  var form = document.getElementById("settings");
  var statusLine = document.getElementById("status");
  var timer = null;
  var AIRFLOW = document.querySelector("meta[name=airflow-base]").content;  // Airflow's UI, e.g. "/" or "/airflow/"
  var VIEW = document.querySelector("meta[name=view-base]").content;  // this view, e.g. "/airflow/eventhubs/"

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "className") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) node.appendChild(c); });
    return node;
  }

  function settings() {
    var out = {};
    FIELDS.forEach(function (f) { var v = form.elements[f].value.trim(); if (v) out[f] = v; });
    return out;
  }

  function query(values) {
    return Object.keys(values).map(function (k) { return encodeURIComponent(k) + "=" + encodeURIComponent(values[k]); }).join("&");
  }

  function age(seconds) {
    if (seconds === null || seconds === undefined) return "age unknown";
    if (seconds < 120) return Math.round(seconds) + " s";
    if (seconds < 7200) return Math.round(seconds / 60) + " min";
    return (seconds / 3600).toFixed(1) + " h";
  }

  function tiLink(batch) {
    var ti = batch.task_instance;
    var label = batch.batch_id.slice(0, 12);
    if (!ti) return el("span", {text: label, title: batch.batch_id});
    var href = AIRFLOW + "dags/" + encodeURIComponent(ti.dag_id) + "/runs/" + encodeURIComponent(ti.run_id) + "/tasks/" +
      encodeURIComponent(ti.task_id) + (ti.map_index >= 0 ? "/mapped/" + ti.map_index : "");
    var interval = ti.interval_start ? " [" + ti.interval_start + " → " + ti.interval_end + "]" : "";
    return el("a", {href: href, target: "_top", className: "ti-link", title: batch.batch_id,
                    text: ti.dag_id + "." + ti.task_id + interval});
  }

  function what(batch) {
    if (batch.kind === "partial") return "partial " + batch.landed + " of " + batch.events + " events landed";
    return batch.kind + " " + batch.events + " events";
  }

  function renderProducers(groups) {
    var body = document.querySelector("#producers tbody");
    body.textContent = "";
    groups.forEach(function (g) {
      g.partitions.forEach(function (p) {
        var row = el("tr", {className: "producer-row", "data-group": g.group, "data-partition": p.partition});
        if (p.error) {
          row.appendChild(el("td", {text: g.group}));
          row.appendChild(el("td", {text: p.partition}));
          row.appendChild(el("td", {colspan: "7", className: "error", text: p.error}));
          body.appendChild(row);
          return;
        }
        var last = p.last_committed;
        var open = el("td", {className: "open-batches"});
        p.open_batches.forEach(function (b) {
          open.appendChild(el("span", {className: "open-batch " + b.kind + (b.stale ? " stale" : ""), "data-kind": b.kind,
            "data-age": b.age_seconds === null ? "" : String(b.age_seconds)},
            [document.createTextNode(what(b) + ", " + age(b.age_seconds) + " old: "), tiLink(b)]));
        });
        [g.group, p.partition].forEach(function (t) { row.appendChild(el("td", {text: t})); });
        row.appendChild(el("td", {className: "num next-seq", text: String(p.next_sequence_number)}));
        row.appendChild(el("td", {className: "num", text: String(p.owner_level)}));
        row.appendChild(el("td", {className: "last-batch"}, [last ? tiLink(last) : el("span", {text: "none"})]));
        row.appendChild(el("td", {className: "num", text: last ? String(last.events) : ""}));
        row.appendChild(el("td", {text: last && last.committed_at ? last.committed_at : ""}));
        var count = el("button", {type: "button", className: "history-open", text: p.committed_batches + " batches"});
        count.disabled = p.committed_batches === 0;
        count.addEventListener("click", function () { showHistory(g.group, p.partition, null, true); });
        row.appendChild(el("td", {className: "num committed-count"}, [count]));
        row.appendChild(open);
        body.appendChild(row);
      });
    });
    document.getElementById("producers-section").hidden = false;
  }

  // A partition's committed batches, newest first, a page at a time ("Older" reads the next page).
  var historyOf = null;
  function showHistory(group, partition, before, fresh) {
    var values = settings();
    values.group = group;
    values.partition = partition;
    if (before !== null) values.before = before;
    historyOf = {group: group, partition: partition};
    get(VIEW + "api/history", values).then(function (page) {
      var body = document.querySelector("#history tbody");
      if (fresh) body.textContent = "";
      document.getElementById("history-title").textContent = group + ", partition " + partition + " (" + page.total + ")";
      page.batches.forEach(function (b) {
        body.appendChild(el("tr", {className: "history-row", "data-ordinal": String(b.ordinal)}, [
          el("td", {className: "num", text: String(b.ordinal)}), el("td", {}, [tiLink(b)]),
          el("td", {className: "num", text: String(b.events)}), el("td", {text: b.first_seq + "–" + b.last_seq}),
          el("td", {text: b.committed_at || ""})]));
      });
      var older = document.getElementById("history-older");
      older.hidden = page.before === null;
      older.dataset.before = page.before === null ? "" : String(page.before);
      document.getElementById("history-section").hidden = false;
    }).catch(function (e) { statusLine.textContent = String(e); statusLine.className = "error"; });
  }
  document.getElementById("history-older").addEventListener("click", function (ev) {
    if (historyOf) showHistory(historyOf.group, historyOf.partition, Number(ev.target.dataset.before), false);
  });

  function renderConsumers(data) {
    var box = document.getElementById("consumers");
    box.textContent = "";
    document.getElementById("consumers-read-at").textContent = "read " + data.read_at;
    data.consumer_groups.forEach(function (g) {
      var max = Math.max.apply(null, [1].concat(g.partitions.map(function (p) { return p.lag_events; })));
      var chart = el("div", {className: "lag-chart", "data-group": g.consumer_group});
      g.partitions.forEach(function (p) {
        var width = (100 * p.lag_events / max).toFixed(1) + "%";
        var bar = el("div", {className: "bar" + (p.lag_events > 0 ? " behind" : ""), "data-partition": p.partition,
                             "data-lag": String(p.lag_events), style: "width:" + width});
        var text = p.lag_events + " events" + (p.lag_events ? ", " + age(p.lag_seconds) : "") +
          " (" + (p.checkpointed === null ? "none" : p.checkpointed) + " / " + p.last_enqueued + ")";
        chart.appendChild(el("div", {className: "bar-row"}, [
          el("span", {text: "p" + p.partition}), el("div", {className: "bar-track"}, [bar]), el("span", {text: text})]));
      });
      box.appendChild(el("div", {className: "group"}, [el("h3", {text: g.consumer_group}), chart]));
    });
    document.getElementById("consumers-section").hidden = data.consumer_groups.length === 0;
  }

  function renderDeadLetters(dl) {
    var section = document.getElementById("dead-letters-section");
    if (!dl) { section.hidden = true; return; }
    var body = document.querySelector("#dead-letters tbody");
    body.textContent = "";
    dl.by_reason.forEach(function (r) {
      var parts = Object.keys(r.partitions).map(function (k) { return "p" + k + ": " + r.partitions[k]; }).join(", ");
      body.appendChild(el("tr", {className: "dl-row", "data-reason": r.reason}, [
        el("td", {text: r.reason}), el("td", {className: "num dl-count", text: String(r.count)}),
        el("td", {text: parts}), el("td", {text: r.oldest || ""})]));
    });
    document.getElementById("replay-command").textContent = dl.replay_command;
    section.hidden = false;
  }

  function get(path, values) {
    return fetch(path + "?" + query(values), {credentials: "same-origin"}).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) throw new Error(r.status + ": " + (body.detail || JSON.stringify(body)));
        return body;
      });
    });
  }

  function load() {
    var values = settings();
    if (!values.conn_id) { statusLine.textContent = "Name an Event Hubs connection."; return; }
    localStorage.setItem(STORE, JSON.stringify(values));
    history.replaceState(null, "", "?" + query(values));
    statusLine.textContent = "Reading…";
    if (timer) clearInterval(timer);
    get(VIEW + "api/overview", values).then(function (data) {
      statusLine.textContent = data.namespace + "/" + data.hub + ": " + Object.keys(data.partitions).length +
        " partitions, read " + data.read_at + " in " + data.elapsed_seconds + " s";
      statusLine.className = "loaded";
      renderProducers(data.producer_groups);
      renderConsumers(data);
      renderDeadLetters(data.dead_letters);
      document.dispatchEvent(new CustomEvent("eventhubs:source", {detail: values}));  // charts.js draws the trends
      if (values.checkpoint_container) {
        timer = setInterval(function () {
          get(VIEW + "api/consumers", values).then(renderConsumers).catch(function (e) { statusLine.textContent = String(e); });
        }, REFRESH_MS);
      }
    }).catch(function (e) { statusLine.textContent = String(e); statusLine.className = "error"; });
  }

  var initial = {};
  var params = new URLSearchParams(location.search);
  if (params.get("conn_id")) params.forEach(function (v, k) { initial[k] = v; });
  else { try { initial = JSON.parse(localStorage.getItem(STORE) || "{}"); } catch (e) { initial = {}; } }
  FIELDS.forEach(function (f) { if (initial[f]) form.elements[f].value = initial[f]; });
  form.addEventListener("submit", function (ev) { ev.preventDefault(); load(); });
  if (initial.conn_id) load();
})();
