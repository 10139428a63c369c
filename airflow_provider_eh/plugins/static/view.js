// The Event Hubs view: finds the connections and hubs through the JSON API next to this page and renders them;
// consumer lag refreshes every few seconds. Every state of the page is its URL's query string (a pasted link
// reopens it, back and forward work); times, intervals, durations and numbers are written by format.js.
// URLs start at the paths the server put in the page's <meta> tags, so Airflow may be served under a sub-path.
(function () {
  "use strict";
  var F = window.EventHubsFormat;
  // what the URL may carry besides conn_id and hub: the settings form's fields, and an open history
  var FIELDS = ["wasb_conn_id", "state_container", "checkpoint_container", "consumer_groups", "sql_conn_id",
                "sink_consumer_group", "lag_consumer_group", "pending_threshold_seconds"];
  var API_KEYS = ["conn_id", "hub"].concat(FIELDS);
  var STORE = "eventhubs-view-last";
  var REFRESH_MS = 5000, TICK_MS = 15000;
  var form = document.getElementById("settings");
  var statusLine = document.getElementById("status");
  var timer = null;
  var AIRFLOW = document.querySelector("meta[name=airflow-base]").content;  // Airflow's UI, e.g. "/" or "/airflow/"
  var VIEW = document.querySelector("meta[name=view-base]").content;  // this view, e.g. "/airflow/eventhubs/"
  var connectionList = null;  // the API's answer, read once per page
  var rendering = 0;  // the latest render: answers of earlier ones are dropped

  var el = window.EventHubsDom.el;

  // a moment: relative text, the exact time (ISO, UTC, local) on hover; kept current by the ticker
  function moment(iso, prefix) {
    if (!iso) return el("span", {text: ""});
    return el("time", {datetime: iso, title: F.exact(iso), "data-prefix": prefix || "", text: (prefix || "") + F.relative(iso)});
  }
  setInterval(function () {
    document.querySelectorAll("time[datetime]").forEach(function (t) {
      t.textContent = (t.dataset.prefix || "") + F.relative(t.getAttribute("datetime"));
    });
  }, TICK_MS);

  function state() {
    var out = {};
    new URLSearchParams(location.search).forEach(function (v, k) { if (v) out[k] = v; });
    return out;
  }

  function query(values) {
    return Object.keys(values).filter(function (k) { return values[k] !== undefined && values[k] !== null && values[k] !== ""; })
      .map(function (k) { return encodeURIComponent(k) + "=" + encodeURIComponent(values[k]); }).join("&");
  }

  function pick(values, keys) {
    var out = {};
    keys.forEach(function (k) { if (values[k]) out[k] = values[k]; });
    return out;
  }

  function href(values) { return "?" + query(values); }

  // a link to another state of the page: a real URL (opens in a new tab too), followed here without reloading
  function stateLink(values, attrs, children) {
    var a = el("a", Object.assign({href: href(values)}, attrs), children);
    a.addEventListener("click", function (ev) {
      if (ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
      ev.preventDefault();
      go(values);
    });
    return a;
  }

  function go(values) {
    history.pushState(null, "", href(values));
    render();
  }

  function replace(values) { history.replaceState(null, "", href(values)); }

  function age(seconds) { return seconds === null || seconds === undefined ? "age unknown" : F.duration(seconds); }

  function tiLink(batch) {
    var ti = batch.task_instance;
    var label = batch.batch_id.slice(0, 12);
    if (!ti) return el("span", {text: label, title: batch.batch_id});
    var path = AIRFLOW + "dags/" + encodeURIComponent(ti.dag_id) + "/runs/" + encodeURIComponent(ti.run_id) + "/tasks/" +
      encodeURIComponent(ti.task_id) + (ti.map_index >= 0 ? "/mapped/" + ti.map_index : "");
    var interval = ti.interval_start ? " [" + F.interval(ti.interval_start, ti.interval_end) + "]" : "";
    var title = batch.batch_id + (ti.interval_start ? "\ndata interval " + ti.interval_start + " – " + ti.interval_end : "");
    return el("a", {href: path, target: "_top", className: "ti-link", title: title, text: ti.dag_id + "." + ti.task_id + interval});
  }

  function what(batch) {
    if (batch.kind === "partial") return "partial " + F.number(batch.landed) + " of " + F.number(batch.events) + " events landed";
    return batch.kind + " " + F.number(batch.events) + " events";
  }

  function renderProducers(groups, values) {
    var body = document.querySelector("#producers tbody");
    body.textContent = "";
    groups.forEach(function (g) {
      var backend = g.backend || "blob";
      g.partitions.forEach(function (p) {
        var row = el("tr", {className: "producer-row", "data-group": g.group, "data-partition": p.partition, "data-backend": backend});
        [g.group, backend === "variable" ? "Variables" : "blob", p.partition].forEach(function (t) { row.appendChild(el("td", {text: t})); });
        if (p.error) {
          row.appendChild(el("td", {colspan: "7", className: "error", text: p.error}));
          body.appendChild(row);
          return;
        }
        var last = p.last_committed;
        var open = el("td", {className: "open-batches"});
        p.open_batches.forEach(function (b) {
          open.appendChild(el("span", {className: "open-batch " + b.kind + (b.stale ? " stale" : ""), "data-kind": b.kind,
            "data-age": b.age_seconds === null ? "" : String(b.age_seconds), title: b.since ? F.exact(b.since) : "since unknown"},
            [what(b) + ", " + age(b.age_seconds) + " old: ", tiLink(b)]));
        });
        row.appendChild(el("td", {className: "num next-seq", text: F.number(p.next_sequence_number)}));
        row.appendChild(el("td", {className: "num", text: F.number(p.owner_level)}));
        row.appendChild(el("td", {className: "last-batch"}, [last ? tiLink(last) : el("span", {text: "none"})]));
        row.appendChild(el("td", {className: "num", text: last ? F.number(last.events) : ""}));
        row.appendChild(el("td", {className: "committed-at"}, [moment(last && last.committed_at)]));
        var opened = Object.assign({}, values, {history_group: g.group, history_partition: p.partition, history_backend: backend});
        var batches = F.number(p.committed_batches) + (p.committed_batches === 1 ? " batch" : " batches");
        row.appendChild(el("td", {className: "num committed-count"}, [p.committed_batches === 0 ? el("span", {text: batches}) :
          stateLink(opened, {className: "history-open"}, [batches])]));
        row.appendChild(open);
        body.appendChild(row);
      });
    });
    document.getElementById("producers-section").hidden = groups.length === 0;
  }

  // A partition's committed batches, newest first, a page at a time ("Older" reads the next page).
  var historyOf = null;
  function showHistory(values, before) {
    var ask = Object.assign(pick(values, API_KEYS), {group: values.history_group, partition: values.history_partition,
                                                     backend: values.history_backend || "blob"});
    if (before !== null) ask.before = before;
    historyOf = values;
    return get(VIEW + "api/history", ask).then(function (page) {
      var body = document.querySelector("#history tbody");
      if (before === null) body.textContent = "";
      document.getElementById("history-title").textContent = values.history_group + ", partition " + values.history_partition +
        " (" + F.number(page.total) + ")";
      page.batches.forEach(function (b) {
        body.appendChild(el("tr", {className: "history-row", "data-ordinal": String(b.ordinal)}, [
          el("td", {className: "num", text: F.number(b.ordinal)}), el("td", {}, [tiLink(b)]),
          el("td", {className: "num", text: F.number(b.events)}),
          el("td", {text: F.number(b.first_seq) + "–" + F.number(b.last_seq)}), el("td", {}, [moment(b.committed_at)])]));
      });
      var older = document.getElementById("history-older");
      older.hidden = page.before === null;
      older.dataset.before = page.before === null ? "" : String(page.before);
      document.getElementById("history-section").hidden = false;
    }).catch(fail);
  }
  document.getElementById("history-older").addEventListener("click", function (ev) {
    if (historyOf) showHistory(historyOf, Number(ev.target.dataset.before));
  });

  function renderConsumers(data) {
    var box = document.getElementById("consumers");
    box.textContent = "";
    var readAt = document.getElementById("consumers-read-at");
    readAt.textContent = "";
    readAt.appendChild(moment(data.read_at, "read "));
    data.consumer_groups.forEach(function (g) {
      var max = Math.max.apply(null, [1].concat(g.partitions.map(function (p) { return p.lag_events; })));
      var chart = el("div", {className: "lag-chart", "data-group": g.consumer_group});
      g.partitions.forEach(function (p) {
        var width = (100 * p.lag_events / max).toFixed(1) + "%";
        var bar = el("div", {className: "bar" + (p.lag_events > 0 ? " behind" : ""), "data-partition": p.partition,
                             "data-lag": String(p.lag_events), style: "width:" + width});
        var text = F.number(p.lag_events) + " events" + (p.lag_events ? ", " + age(p.lag_seconds) : "") +
          " (" + (p.checkpointed === null ? "none" : F.number(p.checkpointed)) + " / " + F.number(p.last_enqueued) + ")";
        var label = el("span", {text: text, title: p.oldest_unprocessed_enqueued_at ?
          "oldest unprocessed event enqueued " + F.exact(p.oldest_unprocessed_enqueued_at) : ""});
        chart.appendChild(el("div", {className: "bar-row"}, [
          el("span", {text: "p" + p.partition}), el("div", {className: "bar-track"}, [bar]), label]));
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
      var parts = Object.keys(r.partitions).map(function (k) { return "p" + k + ": " + F.number(r.partitions[k]); }).join(", ");
      body.appendChild(el("tr", {className: "dl-row", "data-reason": r.reason}, [
        el("td", {text: r.reason}), el("td", {className: "num dl-count", text: F.number(r.count)}),
        el("td", {text: parts}), el("td", {}, [moment(r.oldest)])]));
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

  function fail(e) { statusLine.textContent = String(e.message || e); statusLine.className = "error"; }

  function renderConnections(list, values) {
    var nav = document.getElementById("connections");
    nav.textContent = "";
    list.forEach(function (c) {
      var attrs = {className: "conn-link" + (c.conn_id === values.conn_id ? " selected" : ""), "data-conn": c.conn_id,
                   title: c.error ? c.error : c.namespace + (c.hub ? "/" + c.hub : "")};
      nav.appendChild(stateLink({conn_id: c.conn_id}, attrs, [c.conn_id]));
    });
    if (!list.length) nav.appendChild(el("span", {text: "none you may read: name one under Settings"}));
  }

  function renderHubs(found, values) {
    var nav = document.getElementById("hubs");
    nav.textContent = "";
    found.hubs.forEach(function (h) {
      var target = Object.assign(pick(values, ["conn_id"].concat(FIELDS)), {hub: h.name});
      nav.appendChild(stateLink(target, {className: "hub-link" + (h.name === (values.hub || "").toLowerCase() ? " selected" : ""),
        "data-hub": h.name, title: "found in: " + h.found_in.join(", ")}, [h.name + " ", el("small", {text: h.found_in.join(", ")})]));
    });
    if (!found.hubs.length) nav.appendChild(el("span", {text: "none found in " + found.namespace}));
    // the settings found: shown as placeholders, the fields stay empty; a field to fill only for what was not found
    var missing = document.getElementById("not-found");
    missing.textContent = "";
    Object.keys(found.settings).forEach(function (name) {
      var s = found.settings[name];
      form.elements[name].placeholder = s.value ? s.value + " (" + s.from + ")" : "not found";
      if (!s.value) missing.appendChild(el("li", {className: "missing", "data-setting": name,
        text: name.replace(/_/g, " ") + " not found: set it here, in the connection's '" + name +
              "' field or as [azure_event_hubs] view_" + name}));
    });
    found.problems.forEach(function (p) { missing.appendChild(el("li", {className: "error", text: p})); });
    document.getElementById("settings-summary").textContent = Object.keys(found.settings).map(function (name) {
      return name.replace(/_/g, " ") + ": " + (found.settings[name].value || "not found");
    }).join(" · ");
    if (missing.children.length) document.getElementById("settings-box").open = true;
  }

  function fillForm(values) {
    FIELDS.forEach(function (f) { form.elements[f].value = values[f] || ""; });
    var listed = (connectionList || []).some(function (c) { return c.conn_id === values.conn_id; });
    form.elements.conn_id.value = values.conn_id && !listed ? values.conn_id : "";
  }

  function chooseConnection(list) {
    var ok = list.filter(function (c) { return !c.error; });
    var named = ok.filter(function (c) { return c.conn_id === "azure_event_hubs_default"; });
    return (named[0] || ok[0] || {}).conn_id;
  }

  function render() {
    var mine = ++rendering;
    var values = state();
    if (timer) { clearInterval(timer); timer = null; }
    fillForm(values);
    statusLine.textContent = "Reading…";
    statusLine.className = "";
    var listed = connectionList ? Promise.resolve(connectionList) : get(VIEW + "api/connections", {}).then(function (body) {
      connectionList = body.connections;
      return connectionList;
    });
    listed.then(function (list) {
      if (mine !== rendering) return null;
      if (!values.conn_id) {
        values.conn_id = chooseConnection(list);
        if (!values.conn_id) {
          renderConnections(list, values);
          statusLine.textContent = "No Event Hubs connection found: name one under Settings.";
          document.getElementById("settings-box").open = true;
          return null;
        }
        replace(values);
      }
      fillForm(values);
      renderConnections(list, values);
      return get(VIEW + "api/hubs", pick(values, ["conn_id"].concat(FIELDS)));
    }).then(function (found) {
      if (!found || mine !== rendering) return null;
      if (!values.hub) {
        values.hub = found.hub || (found.hubs[0] || {}).name;
        if (values.hub) replace(values);
      }
      renderHubs(found, values);
      if (!values.hub) { statusLine.textContent = "No hub found for " + values.conn_id + ": see Settings."; return null; }
      localStorage.setItem(STORE, location.search);
      var ask = pick(values, API_KEYS);
      return get(VIEW + "api/overview", ask).then(function (data) {
        if (mine !== rendering) return;
        statusLine.textContent = "";
        statusLine.appendChild(document.createTextNode(data.namespace + "/" + data.hub + ": " +
          F.number(Object.keys(data.partitions).length) + " partitions, "));
        statusLine.appendChild(moment(data.read_at, "read "));
        statusLine.appendChild(document.createTextNode(" in " + F.duration(data.elapsed_seconds)));
        statusLine.className = "loaded";
        renderProducers(data.producer_groups, values);
        renderConsumers(data);
        renderDeadLetters(data.dead_letters);
        document.dispatchEvent(new CustomEvent("eventhubs:source", {detail: ask}));  // charts.js draws the trends
        if (values.history_group && values.history_partition) showHistory(values, null);
        else document.getElementById("history-section").hidden = true;
        if (found.settings.checkpoint_container.value) {
          timer = setInterval(function () {
            get(VIEW + "api/consumers", ask).then(renderConsumers).catch(fail);
          }, REFRESH_MS);
        }
      });
    }).catch(function (e) { if (mine === rendering) fail(e); });
  }

  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var values = pick(state(), ["conn_id", "hub"]);
    FIELDS.forEach(function (f) { var v = form.elements[f].value.trim(); values[f] = v || undefined; });
    var typed = form.elements.conn_id.value.trim();
    if (typed && typed !== values.conn_id) { values.conn_id = typed; delete values.hub; }
    go(pick(values, API_KEYS));
  });
  window.addEventListener("popstate", render);
  if (!location.search && localStorage.getItem(STORE)) history.replaceState(null, "", localStorage.getItem(STORE));
  render();
})();
