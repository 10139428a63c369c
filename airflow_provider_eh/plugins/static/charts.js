// The Event Hubs view's trends: lag per consumer group and partition, and events published per producer group,
// drawn as plain inline SVG from GET api/trends. The page's script announces the hub it shows with the
// "eventhubs:source" event (its query values); the trends are read then and every minute after.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var VIEW = document.querySelector("meta[name=view-base]").content;
  var REFRESH_MS = 60000;
  var WIDTH = 720, HEIGHT = 150, LEFT = 56, RIGHT = 8, TOP = 8, BOTTOM = 22;
  var COLORS = ["#2f80ed", "#e8590c", "#2b8a3e", "#9c36b5", "#c92a2a", "#1098ad", "#5c940d", "#d9480f",
                "#364fc7", "#a61e4d", "#087f5b", "#e67700"];
  var timer = null;
  var current = null;

  function node(tag, attrs, text) {
    var n = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { n.setAttribute(k, attrs[k]); });
    if (text !== undefined) n.textContent = text;
    return n;
  }

  function html(tag, attrs, text) {
    var n = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { n.setAttribute(k, attrs[k]); });
    if (text !== undefined) n.textContent = text;
    return n;
  }

  function clock(ms) {
    var d = new Date(ms);
    return ("0" + d.getHours()).slice(-2) + ":" + ("0" + d.getMinutes()).slice(-2);
  }

  function count(n) { return Number(n).toLocaleString(); }

  // an empty chart of the window [t0, t1] with a y axis up to max: returns the svg and the two scales
  function frame(t0, t1, max, unit) {
    var svg = node("svg", {viewBox: "0 0 " + WIDTH + " " + HEIGHT, width: WIDTH, height: HEIGHT, role: "img"});
    var x = function (t) { return LEFT + (WIDTH - LEFT - RIGHT) * (t - t0) / Math.max(1, t1 - t0); };
    var y = function (v) { return TOP + (HEIGHT - TOP - BOTTOM) * (1 - v / Math.max(1, max)); };
    svg.appendChild(node("line", {x1: LEFT, y1: y(0), x2: WIDTH - RIGHT, y2: y(0), stroke: "#9aa5b1"}));
    svg.appendChild(node("line", {x1: LEFT, y1: TOP, x2: LEFT, y2: y(0), stroke: "#9aa5b1"}));
    svg.appendChild(node("text", {x: LEFT - 4, y: TOP + 10, "text-anchor": "end", "font-size": 10, fill: "#52606d"},
                         count(max) + " " + unit));
    svg.appendChild(node("text", {x: LEFT - 4, y: y(0), "text-anchor": "end", "font-size": 10, fill: "#52606d"}, "0"));
    for (var i = 0; i <= 4; i++) {
      var t = t0 + (t1 - t0) * i / 4;
      svg.appendChild(node("text", {x: x(t), y: HEIGHT - 6, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle",
                                    "font-size": 10, fill: "#52606d"}, clock(t)));
    }
    return {svg: svg, x: x, y: y};
  }

  function renderLag(data, into) {
    into.textContent = "";
    var t0 = Date.parse(data.since), t1 = Date.parse(data.read_at);
    if (!data.lag) { into.appendChild(html("p", {}, "Name a checkpoint container to see the lag over time.")); return; }
    if (!data.lag.consumer_groups.length) {
      into.appendChild(html("p", {"class": "trend-empty"}, data.sampling.enabled
        ? "No lag sample yet: the API server samples this hub every " + data.sampling.interval_seconds + " s from now on."
        : "No lag sample kept. Lag is sampled when [azure_event_hubs] lag_sampling is True."));
      return;
    }
    data.lag.consumer_groups.forEach(function (g) {
      var max = 1;
      g.partitions.forEach(function (p) { p.points.forEach(function (pt) { max = Math.max(max, pt[1]); }); });
      var chart = frame(t0, t1, max, "events");
      var legend = html("div", {"class": "trend-legend"});
      g.partitions.forEach(function (p, i) {
        var color = COLORS[i % COLORS.length];
        var points = p.points.map(function (pt) {
          return chart.x(Date.parse(pt[0])).toFixed(1) + "," + chart.y(pt[1]).toFixed(1);
        }).join(" ");
        var line = node("polyline", {points: points, fill: "none", stroke: color, "stroke-width": 1.5,
                                     "class": "lag-line", "data-partition": p.partition});
        var last = p.points[p.points.length - 1];
        line.appendChild(node("title", {}, "partition " + p.partition + ": " + count(last[1]) + " events behind at " +
                                           new Date(Date.parse(last[0])).toLocaleString()));
        chart.svg.appendChild(line);
        var key = html("span", {"class": "trend-key"}, "p" + p.partition);
        key.style.borderColor = color;
        legend.appendChild(key);
      });
      var box = html("div", {"class": "trend-chart trend-lag", "data-group": g.consumer_group});
      box.appendChild(html("h3", {}, g.consumer_group));
      box.appendChild(chart.svg);
      box.appendChild(legend);
      into.appendChild(box);
    });
  }

  function renderPublished(data, into) {
    into.textContent = "";
    var pub = data.published;
    if (!pub.producer_groups.length) {
      into.appendChild(html("p", {"class": "trend-empty"}, "Nothing committed in the window."));
      return;
    }
    var t0 = Date.parse(data.since), t1 = Date.parse(data.read_at), width = pub.bucket_seconds * 1000;
    pub.producer_groups.forEach(function (g) {
      var max = 1;
      g.buckets.forEach(function (b) { max = Math.max(max, b[1]); });
      var chart = frame(t0, t1, max, "events");
      g.buckets.forEach(function (b) {
        var start = Math.max(t0, Date.parse(b[0])), end = Math.min(t1, Date.parse(b[0]) + width);
        var x = chart.x(start), top = chart.y(b[1]);
        var bar = node("rect", {x: x.toFixed(1), y: top.toFixed(1), width: Math.max(1, chart.x(end) - x - 1).toFixed(1),
                                height: (chart.y(0) - top).toFixed(1), fill: "#2f80ed", "class": "volume-bar",
                                "data-start": b[0], "data-events": b[1], "data-batches": b[2]});
        bar.appendChild(node("title", {}, count(b[1]) + " events in " + count(b[2]) + " batches from " +
                                          new Date(Date.parse(b[0])).toLocaleString()));
        chart.svg.appendChild(bar);
      });
      var box = html("div", {"class": "trend-chart trend-published", "data-group": g.group});
      box.appendChild(html("h3", {}, g.group));
      box.appendChild(chart.svg);
      into.appendChild(box);
    });
    if (!pub.complete) into.appendChild(html("p", {"class": "trend-partial"}, "Older batches are still being read."));
  }

  function query(values) {
    return Object.keys(values).map(function (k) { return encodeURIComponent(k) + "=" + encodeURIComponent(values[k]); }).join("&");
  }

  function load() {
    var values = current;
    fetch(VIEW + "api/trends?" + query(values), {credentials: "same-origin"}).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) throw new Error(r.status + ": " + (body.detail || JSON.stringify(body)));
        return body;
      });
    }).then(function (data) {
      if (values !== current) return;  // another hub was opened meanwhile
      document.getElementById("trends-section").hidden = false;
      document.getElementById("trends-read-at").textContent = "last " + data.hours + " h, read " +
        new Date(Date.parse(data.read_at)).toLocaleString();
      renderLag(data, document.getElementById("lag-trends"));
      renderPublished(data, document.getElementById("publish-trends"));
      document.getElementById("trends-section").dataset.readAt = data.read_at;
    }).catch(function (e) {
      var status = document.getElementById("trends-status");
      if (status) { status.textContent = String(e); status.className = "error"; }
    });
  }

  document.addEventListener("eventhubs:source", function (ev) {
    var values = {};
    ["conn_id", "hub", "wasb_conn_id", "state_container", "checkpoint_container", "lag_consumer_group"].forEach(function (k) {
      if (ev.detail && ev.detail[k]) values[k] = ev.detail[k];
    });
    current = values;
    if (timer) clearInterval(timer);
    load();
    timer = setInterval(load, REFRESH_MS);
  });
})();
