"""The doctor's renderers: the report (:mod:`graphlift.doctor.report`'s dict) as text, JSON and
a self-contained HTML page. They read the report and add nothing to it but presentation: the
time's conclusion sentence, locations relative to the working directory, the page's timeline.
"""

from __future__ import annotations

import bisect
import html
import json
import os
import textwrap
from typing import Any

from graphlift.doctor.report import Cause, Failure, line_number, plural, triage


# -- text ----------------------------------------------------------------------------------------
def format_text(report: dict[str, Any]) -> str:
    """The report as a terminal reads it, wrapped to 100 columns."""
    command = " ".join(["python", report["script"], *report["args"]])
    compiles = len(report["compiles"])
    functions = len({(c["function"], c["location"]) for c in report["compiles"]})
    lines = [
        "=" * 100,
        f"graphlift doctor: {command}",
        f"the script exited with code {report['exit_code']} after {report['seconds']:.2f} s; "
        f"graphlift compiled {compiles} time{plural(compiles)} in {functions} "
        f"function{plural(functions)}",
    ]
    if report["exit_code"] != 0:
        lines += _wrap("the script failed (its error is above): the report covers what ran "
                       "before it stopped", "")
    lines += ["", *_wrap(f"Verdict: {report['verdict']['summary']}", "")]
    lines += _text_verify(report.get("verify_failures", []))
    lines += _text_breaks(report["graph_breaks"])
    lines += _text_recompiles(report["recompiles"])
    lines += _text_time(report["time"])
    return "\n".join(lines) + "\n"


_DETAIL = " " * 7  # the indent of the lines under one break or one function


def _wrap(text: str, indent: str = _DETAIL) -> list[str]:
    return textwrap.wrap(text, 100, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False) or [indent]


def _text_verify(failures: list[dict[str, Any]]) -> list[str]:
    """Verify mode's catches, first: each entry, what differed and its reproducer."""
    if not failures:
        return []
    lines = ["", f"WRONG RESULTS (verify mode): {len(failures)}"]
    for failure in failures:
        lines.append(f"  - {failure['function']} ({short(failure['location'])}), cache entry "
                     f"{failure['compile_id']}")
        lines += _wrap(f"difference: {failure['difference']}")
        lines += _wrap(f"reproducer: {failure['reproducer']}")
    return lines


def _text_breaks(breaks: list[dict[str, Any]]) -> list[str]:
    if not breaks:
        return ["", "1. Graph breaks: none."]
    count = sum(group["count"] for group in breaks)
    lines = ["", f"1. Graph breaks: {count} at {len(breaks)} location{plural(breaks)}. "
                 "Fix these first."]
    for group in breaks:
        lines += _wrap(f"{group['count']}x {group['id']} {group['type']} at "
                       f"{short(group['location'])} (in {', '.join(group['functions'])})", "   ")
        if group["source_line"]:
            lines.append(f"{_DETAIL}| {group['source_line']}")
        lines += _wrap(f"reason: {group['reason']}")
        for reason in group["other_reasons"]:
            lines += _wrap(f"also: {reason}")
        for hint in group["hints"]:
            lines += _wrap(f"hint: {hint}")
        lines += _wrap(f"then: {group['outcome']}")
        lines += _wrap(f"see: {group['docs']}")
    return lines


def _text_recompiles(recompiling: list[dict[str, Any]]) -> list[str]:
    if not recompiling:
        return ["", "2. Recompiles: none (every function compiled once)."]
    lines = ["", f"2. Recompiles: {len(recompiling)} function{plural(recompiling)}."]
    for item in recompiling:
        limit = "".join(f", hit config.{hit['which']} ({hit['limit']}): later misses run eagerly"
                        for hit in item["limits"][:1])
        lines += _wrap(f"{item['function']} at {short(item['location'])}: "
                       f"{item['compiles']} compiles{limit}", "   ")
        top = item["top_guard"]
        if top is not None:
            lines += _wrap(f"guard that failed most often ({top['count']} of "
                           f"{item['failures']} failures): {top['example']}")
            more = ", ..." if len(top["values"]) > 12 else ""
            lines += _wrap(f"values seen: {', '.join(top['values'][:12])}{more}")
        lines += _wrap(f"triage [{item['cause']}]: {item['problem']}")
        lines += _wrap(f"fix: {item['fix']}")
        for note in item["notes"]:
            lines += _wrap(f"note: {note}")
    return lines


def _text_time(summary: dict[str, Any]) -> list[str]:
    lines = ["", "3. Time"]
    if summary["functions"]:
        lines.append(f"   {'function':<32} {'calls':>6} {'hit rate':>8} {'compiles':>8} "
                     f"{'translate ms':>12} {'backend ms':>10} {'guards ms':>9}")
    for row in summary["functions"]:
        sec = row["seconds"]
        lines.append(f"   {row['function'][:32]:<32} {row['calls']:>6} {row['hit_rate']:>8.0%} "
                     f"{row['compiles']:>8} {sec['translate'] * 1e3:>12.2f} "
                     f"{sec['backend'] * 1e3:>10.2f} {sec['guards'] * 1e3:>9.2f}")
    lines += _wrap(f"compile time {summary['compile_seconds'] * 1e3:.1f} ms, guard evaluation "
                   f"on misses {summary['guard_seconds'] * 1e3:.2f} ms, cache-hit rate "
                   f"{summary['hit_rate']:.0%}, in a {summary['script_seconds']:.2f} s run", "   ")
    lines += _wrap(time_conclusion(summary), "   ")
    return lines


def time_conclusion(summary: dict[str, Any]) -> str:
    """One sentence: what the time is explained by, or that the backend is the suspect."""
    if summary["explained_by"]:
        found = " and ".join(name.replace("_", " ") for name in summary["explained_by"])
        return f"The {found} above cost time: fix them, then run the doctor again."
    if summary["backend_suspect"]:
        return ("Neither graph breaks nor recompiles explain the time: every function compiled "
                "once, as whole graphs. If the script is still slow, the problem is in the "
                "backend: profile the compiled graphs, or try another backend.")
    return "Nothing was compiled, so graphlift spent no time."


def short(location: str | None) -> str:
    """``file:line`` relative to the working directory when the file is under it."""
    if not location:
        return "<unknown>"
    path = location.rpartition(":")[0] or location
    if os.path.isabs(path) and path.startswith(os.getcwd() + os.sep):
        return os.path.relpath(path) + location[len(path):]
    return location


# -- JSON ----------------------------------------------------------------------------------------
def format_json(report: dict[str, Any]) -> str:
    """The report as ``--json`` prints it: the dict itself, indented, with a final newline."""
    return json.dumps(report, indent=1) + "\n"


# -- HTML ----------------------------------------------------------------------------------------
def write_html(report: dict[str, Any], path: str) -> None:
    """Write :func:`format_html`'s page to ``path``."""
    with open(path, "w", encoding="utf-8") as file:
        file.write(format_html(report))


def format_html(report: dict[str, Any]) -> str:
    """A self-contained page (inline CSS and script, no network): the three steps, a recompile
    timeline, and the guards and graph code of every cache entry."""
    command = " ".join(["python", report["script"], *report["args"]])
    sections = [
        f"<h1>graphlift doctor</h1><p class=meta>{_e(command)} &middot; exit code "
        f"{report['exit_code']} &middot; {report['seconds']:.2f} s</p>",
        f"<p id=verdict class='verdict {_e(report['verdict']['problem'])}'>"
        f"{_e(report['verdict']['summary'])}</p>",
        _html_verify(report.get("verify_failures", [])),
        _html_breaks(report["graph_breaks"]),
        _html_recompiles(report["recompiles"]),
        _html_time(report["time"]),
        _html_entries(report["compiles"]),
    ]
    data = json.dumps(_timeline_data(report)).replace("<", "\\u003c")
    return (_PAGE.replace("__CSS__", _CSS).replace("__BODY__", "\n".join(sections))
            .replace("__DATA__", data).replace("__SCRIPT__", _SCRIPT))


def _html_verify(failures: list[dict[str, Any]]) -> str:
    if not failures:
        return ""
    items = "".join(f"<li><b>{_e(f['function'])}</b> ({_e(short(f['location']))}), entry "
                    f"{_e(f['compile_id'])}: {_e(f['difference'])}<br>reproducer: "
                    f"<code>{_e(f['reproducer'])}</code></li>" for f in failures)
    return f"<h2>Wrong results (verify mode)</h2><ul>{items}</ul>"


def _e(text: Any) -> str:
    return html.escape(str(text))


def _html_breaks(breaks: list[dict[str, Any]]) -> str:
    if not breaks:
        return "<section id=breaks><h2>1. Graph breaks</h2><p>None.</p></section>"
    items = []
    for group in breaks:
        line = line_number(group["location"])
        source = "".join(
            f"<span class='{'hit' if number == line else ''}'>{number:>5} | {_e(text)}\n</span>"
            for number, text in group["context"])
        hints = "".join(f"<li>hint: {_e(hint)}</li>" for hint in group["hints"])
        items.append(
            f"<div class=break><h3><span class=count>{group['count']}&times;</span> "
            f"<code>{_e(group['id'])} {_e(group['type'])}</code> at "
            f"<code>{_e(short(group['location']))}</code> "
            f"in {_e(', '.join(group['functions']))}</h3>"
            f"<pre class=source>{source or _e(group['source_line'] or '')}</pre>"
            f"<p>reason: {_e(group['reason'])}</p><ul>{hints}</ul>"
            f"<p class=dim>then: {_e(group['outcome'])}</p>"
            f"<p class=dim>see: <code>{_e(group['docs'])}</code></p></div>")
    return (f"<section id=breaks><h2>1. Graph breaks</h2><p class=first>Fix these first: "
            f"{sum(g['count'] for g in breaks)} break(s) at {len(breaks)} location(s).</p>"
            f"{''.join(items)}</section>")


def _html_recompiles(recompiling: list[dict[str, Any]]) -> str:
    cards = []
    for item in recompiling:
        top = item["top_guard"]
        limit = "".join(f" &middot; <b>hit config.{_e(hit['which'])} ({hit['limit']})</b>"
                        for hit in item["limits"][:1])
        guard = (f"<p>guard that failed most often ({top['count']} of {item['failures']}): "
                 f"<code>{_e(top['example'])}</code></p><p class=dim>values seen: "
                 f"{_e(', '.join(top['values']))}</p>" if top else "")
        notes = "".join(f"<li>{_e(note)}</li>" for note in item["notes"])
        cards.append(
            f"<div class='recompile {_e(item['cause'])}'><h3>{_e(item['function'])} "
            f"<code>{_e(short(item['location']))}</code></h3>"
            f"<p>{item['compiles']} compiles{limit}</p>{guard}"
            f"<p>triage <span class=cause>{_e(item['cause'])}</span>: {_e(item['problem'])}</p>"
            f"<p>fix: {_e(item['fix'])}</p><ul>{notes}</ul></div>")
    body = "".join(cards) or "<p>None: every function compiled once.</p>"
    return (f"<section id=recompiles><h2>2. Recompiles</h2><h3>Timeline</h3>"
            f"<div id=timeline></div>{body}</section>")


def _html_time(summary: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{_e(row['function'])}</td><td>{row['calls']}</td><td>{row['hit_rate']:.0%}</td>"
        f"<td>{row['compiles']}</td><td>{row['seconds']['translate'] * 1e3:.2f}</td>"
        f"<td>{row['seconds']['backend'] * 1e3:.2f}</td>"
        f"<td>{row['seconds']['guards'] * 1e3:.2f}</td></tr>" for row in summary["functions"])
    return (f"<section id=time><h2>3. Time</h2><table><tr><th>function</th><th>calls</th>"
            f"<th>hit rate</th><th>compiles</th><th>translate ms</th><th>backend ms</th>"
            f"<th>guards ms</th></tr>{rows}</table><p>compile time "
            f"{summary['compile_seconds'] * 1e3:.1f} ms, cache-hit rate {summary['hit_rate']:.0%}"
            f"</p><p class=conclusion>{_e(time_conclusion(summary))}</p></section>")


def _html_entries(compiles: list[dict[str, Any]]) -> str:
    items = []
    for record in compiles:
        anchor = "compile-" + record["compile_id"].replace("/", "-")
        reasons = "".join(f"<li>{_e(reason)}</li>" for reason in record["reasons"])
        guards = "".join(f"<li><code>{_e(guard)}</code></li>" for guard in record["guards"])
        graph = (f"<pre class=graph>{_e(record['graph_code'])}</pre>" if record["graph_code"]
                 else "<p class=dim>no graph</p>")
        breaks = "".join(f"<li>graph break: {_e(b['id'])} {_e(b['type'])} at "
                         f"{_e(short(b['location']))}</li>"
                         for b in record["breaks"])
        items.append(
            f"<details class=entry id={anchor}><summary><code>{_e(record['compile_id'])}</code> "
            f"{_e(record['function'])} &middot; {record['op_count']} ops &middot; "
            f"{len(record['guards'])} guards</summary>"
            f"{'<p>recompiled because:</p><ul>' + reasons + '</ul>' if reasons else ''}"
            f"<ul>{breaks}</ul><p>guards:</p><ol class=guards>{guards}</ol>{graph}</details>")
    return (f"<section id=entries><h2>Cache entries</h2>{''.join(items) or '<p>None.</p>'}"
            f"</section>")


def _timeline_data(report: dict[str, Any]) -> dict[str, Any]:
    """What the page's script draws: per function, its compiles and limit hits, placed by
    ``order`` (the how-manieth compile of the run), so that a slow compile crowds nothing."""
    rows: dict[str, dict[str, Any]] = {}
    for order, record in enumerate(report["compiles"]):
        row = rows.setdefault(f"{record['function']} {record['location']}", {
            "function": record["function"], "compiles": [], "limits": []})
        failure = Failure.parse(record["reasons"][0]) if record["reasons"] else None
        row["compiles"].append({
            "id": record["compile_id"], "order": order, "time": record["time"],
            "cause": triage(failure.guard).value if failure else "first",
            "reason": failure.text if failure else "first compile"})
    times = [record["time"] for record in report["compiles"]]
    for limit in report["limits"]:
        row = rows.get(f"{limit['function']} {limit['location']}")
        if row is not None:
            order = bisect.bisect_right(times, limit["time"]) - 0.5
            row["limits"].append({"order": order, "time": limit["time"],
                                  "which": limit["which"]})
    return {"rows": list(rows.values()), "count": len(times), "colors": TIMELINE_COLORS}


# The timeline's dot colour per cause of the recompile ("first": a function's first compile).
TIMELINE_COLORS = {
    "first": "#999999", Cause.SCALAR.value: "#d68910", Cause.SIZE.value: "#8e44ad",
    Cause.GLOBAL_STATE.value: "#2874a6", Cause.IDENTITY.value: "#c0392b",
    Cause.TYPE.value: "#16a085", Cause.TENSOR_PROPERTY.value: "#7d6608",
    Cause.CONTAINER.value: "#1e8449", Cause.ALIASING.value: "#6c3483",
    Cause.OPTIONS.value: "#34495e", Cause.OTHER.value: "#555555",
}

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>graphlift doctor</title><style>__CSS__</style></head>
<body>
__BODY__
<script type="application/json" id="doctor-data">__DATA__</script>
<script>__SCRIPT__</script>
</body></html>
"""

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
code, pre { font: 12px/1.4 ui-monospace, monospace; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; }
.meta, .dim { color: #666; }
.verdict { padding: .6em 1em; border-left: 4px solid #888; background: #f4f4f4; }
.verdict.graph_breaks { border-color: #c0392b; } .verdict.recompiles { border-color: #d68910; }
.verdict.backend { border-color: #2874a6; } .verdict.wrong_results { border-color: #7d3c98; }
.break, .recompile { border: 1px solid #ddd; border-radius: 4px; padding: 0 1em; margin: .8em 0; }
.count { color: #c0392b; } .source .hit { background: #fdecea; font-weight: bold; }
.cause { background: #fcf3cf; padding: 0 .3em; border-radius: 3px; }
table { border-collapse: collapse; } td, th { border: 1px solid #ddd; padding: .2em .6em; }
td + td { text-align: right; }
.legend span { margin-right: 1.2em; }
#timeline svg text { font: 11px system-ui, sans-serif; } #timeline circle { cursor: pointer; }
details.entry { margin: .3em 0; } details.entry:target { outline: 2px solid #2874a6; }
"""

# Draws the recompile timeline from the JSON data, then marks the page as rendered (data-ok).
_SCRIPT = """
(function () {
  var SVG = 'http://www.w3.org/2000/svg';
  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    parent.appendChild(node);
    return node;
  }
  function draw(box, data) {
    var rows = data.rows, colors = data.colors, used = {};
    if (!rows.length) { box.textContent = 'Nothing was compiled.'; return; }
    var left = 200, width = 640, step = 26, span = Math.max(data.count - 1, 1);
    function x(order) { return left + 10 + Math.max(order, 0) / span * (width - 20); }
    var svg = el('svg', {width: left + width + 10, height: rows.length * step + 30,
                         role: 'img'}, box);
    rows.forEach(function (row, i) {
      var y = 20 + i * step;
      el('text', {x: 4, y: y + 4}, svg).textContent =
        row.function + ' (' + row.compiles.length + ')';
      el('line', {x1: left, x2: left + width, y1: y, y2: y, stroke: '#ddd'}, svg);
      row.limits.forEach(function (l) {
        var mark = el('rect', {x: x(l.order) - 2, y: y - 9, width: 4, height: 18,
                               fill: '#c0392b', 'class': 'limit'}, svg);
        el('title', {}, mark).textContent =
          'hit config.' + l.which + ' at ' + l.time.toFixed(3) + ' s: later misses run eagerly';
      });
      row.compiles.forEach(function (c) {
        used[c.cause] = true;
        var dot = el('circle', {cx: x(c.order), cy: y, r: 5, 'class': 'compile ' + c.cause,
                                fill: colors[c.cause] || colors.other}, svg);
        el('title', {}, dot).textContent =
          c.id + ' at ' + c.time.toFixed(3) + ' s: ' + c.reason;
        dot.addEventListener('click', function () {
          var entry = document.getElementById('compile-' + c.id.replace('/', '-'));
          if (entry) { entry.open = true; entry.scrollIntoView(); }
        });
      });
    });
    el('text', {x: left, y: rows.length * step + 24}, svg).textContent =
      'compiles in the order they happened; hover a dot for the guard that failed, ' +
      'click it for the cache entry';
    var legend = document.createElement('p');
    legend.className = 'legend';
    Object.keys(used).forEach(function (cause) {
      var item = document.createElement('span');
      item.innerHTML = '&#9679; ';
      item.style.color = colors[cause] || colors.other;
      item.appendChild(document.createTextNode(cause === 'first' ? 'first compile' : cause));
      legend.appendChild(item);
    });
    box.appendChild(legend);
  }
  var data = JSON.parse(document.getElementById('doctor-data').textContent);
  draw(document.getElementById('timeline'), data);
  document.body.setAttribute('data-ok', '1');
})();
"""
