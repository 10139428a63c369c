// Times, intervals, durations and numbers as people read them; the JSON API keeps the exact values.
// Pure functions (no DOM): the page loads this file as window.EventHubsFormat, node tests require() it.
(function (root) {
  "use strict";
  var HOUR = 3600, DAY = 86400;

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  function parse(value) {
    if (value === null || value === undefined || value === "") return null;
    var d = value instanceof Date ? value : new Date(value);
    return isNaN(d.getTime()) ? null : d;
  }

  // 1234567 -> "1,234,567"; null -> ""
  function number(n) {
    if (n === null || n === undefined || n === "") return "";
    return Number(n).toLocaleString("en-US", {maximumFractionDigits: 1});
  }

  // seconds -> "0.4 s", "45 s", "4 min", "4 min 5 s" (under 10 min), "2.5 h", "3 d 4 h"
  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "unknown";
    var s = Math.abs(Number(seconds));
    if (s < 10) return (Math.round(s * 10) / 10) + " s";
    if (s < 60) return Math.round(s) + " s";
    if (s < 600) {
      var m = Math.floor(s / 60), rest = Math.round(s - 60 * m);
      if (rest === 60) { m += 1; rest = 0; }
      return m + " min" + (rest ? " " + rest + " s" : "");
    }
    if (s < HOUR) return Math.round(s / 60) + " min";
    if (s < 2 * DAY) return (Math.round(s / HOUR * 10) / 10) + " h";
    var d = Math.floor(s / DAY), h = Math.round((s - d * DAY) / HOUR);
    if (h === 24) { d += 1; h = 0; }
    return d + " d" + (h ? " " + h + " h" : "");
  }

  // a moment relative to now (or to ``now``), coarse: "just now", "40 s ago", "4 min ago", "3 h ago", "2 d ago", "in 2 h"
  function relative(value, now) {
    var d = parse(value);
    if (!d) return "";
    var diff = ((now === undefined ? Date.now() : parse(now).getTime()) - d.getTime()) / 1000;
    if (Math.abs(diff) < 5) return "just now";
    var s = Math.abs(diff), words;
    if (s < 60) words = Math.round(s) + " s";
    else if (s < 90 * 60) words = Math.round(s / 60) + " min";
    else if (s < 48 * HOUR) words = Math.round(s / HOUR) + " h";
    else words = Math.round(s / DAY) + " d";
    return diff > 0 ? words + " ago" : "in " + words;
  }

  function utcText(d) {
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " +
      pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds());
  }

  function localText(d) {
    var offset = -d.getTimezoneOffset(), sign = offset < 0 ? "-" : "+";
    offset = Math.abs(offset);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + pad(d.getHours()) + ":" +
      pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + " UTC" + sign + pad(Math.floor(offset / 60)) + ":" + pad(offset % 60);
  }

  // the exact moment for a title: the ISO value as the API gave it, UTC and local time
  function exact(value) {
    var d = parse(value);
    if (!d) return "";
    return String(value instanceof Date ? d.toISOString() : value) + "\nUTC: " + utcText(d) + "\nlocal: " + localText(d);
  }

  function day(d) { return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()); }
  function hm(d) { return pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()); }
  function midnight(d) { return d.getUTCHours() === 0 && d.getUTCMinutes() === 0 && d.getUTCSeconds() === 0 && d.getUTCMilliseconds() === 0; }

  // a data interval as its schedule names it (UTC): a day "2026-11-24", an hour "2026-11-24 09:00–10:00",
  // a month "2026-11", a year "2026", a week "2026-11-23 – 2026-11-30"; otherwise start–end, compact
  function interval(start, end) {
    var a = parse(start), b = parse(end);
    if (!a && !b) return "";
    if (!b || a.getTime() === b.getTime()) return utcText(a).slice(0, 16);
    var span = (b.getTime() - a.getTime()) / 1000;
    if (midnight(a) && midnight(b)) {
      if (span === DAY) return day(a);
      if (a.getUTCDate() === 1 && b.getUTCDate() === 1) {
        var months = (b.getUTCFullYear() - a.getUTCFullYear()) * 12 + b.getUTCMonth() - a.getUTCMonth();
        if (months === 1) return day(a).slice(0, 7);
        if (months === 12 && a.getUTCMonth() === 0) return String(a.getUTCFullYear());
      }
      return day(a) + " – " + day(b);
    }
    if (day(a) === day(b) || (midnight(b) && span < DAY)) return day(a) + " " + hm(a) + "–" + (midnight(b) ? "24:00" : hm(b));
    return day(a) + " " + hm(a) + " – " + day(b) + " " + hm(b);
  }

  var api = {number: number, duration: duration, relative: relative, exact: exact, interval: interval};
  if (typeof module !== "undefined" && module.exports) module.exports = api;
  else root.EventHubsFormat = api;
})(this);
