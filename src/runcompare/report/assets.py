"""The report page's style and drawing code (inline: the page makes no request).

The drawing code reads the page's one JSON block (:mod:`.charts` describes it) and draws every
chart on the axis picked in the page: each run's values as logged (faint) and smoothed (bold),
a trace of few points as its points (markers), the runs beyond the coloured ones as one faint
grey layer, seed bands on every axis their runs line up on. Curves that coincide on the axis
drawn get dash patterns and are named in the chart's caption. Every name from a log reaches
plotly through ``text()`` (entities: plotly reads its labels as a small HTML) and the page
through ``textContent``.
"""

from __future__ import annotations

from pathlib import Path

from ..outputs import head

__all__ = ["CSP", "GENERATOR", "PAGE", "SCRIPT", "STYLE", "is_report"]

#: The mark of a page runcompare wrote, in its first KiB: only such a file is replaced.
GENERATOR = '<meta name="generator" content="runcompare">'


def is_report(path: Path) -> bool:
    """Whether ``path`` is a page runcompare wrote (:data:`GENERATOR` in its first KiB)."""
    return GENERATOR.encode() in head(path, 1024)

#: No request leaves the page: everything it needs is inline.
CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; "
       "style-src 'unsafe-inline'; img-src data:")

STYLE = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;padding:1em 1.2em 2em;max-width:1500px;
color:#222;overflow-wrap:anywhere}
h1{font-size:20px;margin:.2em 0 .4em}h2{font-size:17px;margin:1.4em 0 .4em}
table{border-collapse:collapse;margin:.3em 0}td,th{border:1px solid #ccc;padding:3px 8px}
td{text-align:right;white-space:nowrap}th{text-align:left;font-weight:600;white-space:nowrap}
.scroll{max-width:100%;overflow-x:auto}.board{max-height:50vh;overflow-y:auto}
.note{color:#666}.verdict{font-size:15px;padding:.6em .8em;margin:.3em 0;background:#f3f6fa;
border-left:4px solid #2a6ebb}
.headline{font-size:20px;font-weight:600;margin:.2em 0 .5em;line-height:1.3}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(200px,1fr));gap:.5em;
margin:.3em 0 .4em}.card{border:1px solid #d5dbe3;border-radius:6px;padding:.4em .7em;
background:#fafbfd}.card .label{font-size:12px;color:#555}.card .value{font-size:18px;
font-weight:600}.card .detail{font-size:12px;color:#555}
details.prose{margin:.5em 0}details.prose summary{cursor:pointer;color:#2a6ebb}
table.bykey{display:inline-table;margin:.3em 1em .3em 0;vertical-align:top}
.warning{color:#8a5a00}.error{color:#b00020}.info{color:#555}
tr.differ>*{background:#fff4d6}.tag{font-size:11px;font-weight:600;color:#8a5a00;
background:#ffe7a8;border-radius:3px;padding:0 4px}
button.src{font:inherit;color:inherit;background:none;border:0;padding:0;cursor:pointer;
border-bottom:1px dotted #2a6ebb}
#rc-pop{position:absolute;z-index:10;max-width:min(360px,90vw);background:#fff;
border:1px solid #2a6ebb;border-radius:4px;padding:.4em .6em;box-shadow:0 2px 8px #0003;
font-size:13px}
.swatch{display:inline-block;width:10px;height:10px;margin-right:6px;border-radius:2px}
.swatch.faint{background:#bbb}
.controls{display:flex;flex-wrap:wrap;gap:.4em 1.2em;align-items:center;margin:.6em 0}
figure{margin:0;min-width:0}.tools{text-align:right;font-size:12px;color:#555;height:18px}
.chart{height:340px;width:100%}.main .chart{height:min(460px,52vh)}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:1em 1.4em}
figcaption{font-size:12px;color:#555;min-height:1em}
.key{display:flex;flex-wrap:wrap;gap:.2em 1em;font-size:13px;margin:.3em 0}
footer{margin-top:3em;color:#666;font-size:12px}
th.sortable{cursor:pointer}th[data-sorted=up]::after{content:" ▲"}
th[data-sorted=down]::after{content:" ▼"}
.controls input[type=range]{vertical-align:middle;width:140px}
@media (prefers-color-scheme:dark){body{background:#16181c;color:#ddd}
td,th{border-color:#444}.note,.card .label,.card .detail,figcaption,.tools,footer{color:#aaa}
.verdict{background:#1f2630}.card{background:#1d2026;border-color:#3a3f47}
tr.differ>*{background:#3a3220}#rc-pop{background:#1d2026;color:#ddd}
a,details.prose summary{color:#7fb0ff}select,input{background:#222;color:#ddd}}
@media (max-width:640px){body{padding:.6em .7em}.grid{grid-template-columns:1fr}
.main .chart{height:360px}.chart{height:300px}.verdict{font-size:14px}
.headline{font-size:17px}.cards{grid-template-columns:1fr 1fr}.card .value{font-size:15px}}
"""

SCRIPT = r"""
(function () {
  const data = JSON.parse(document.getElementById("rc-data").textContent);
  const top = data.top;
  const colour = name => data.palette[top.indexOf(name) % data.palette.length];
  // plotly reads titles and trace names as its own small HTML: entities keep them literal
  // text (display.plotly_text does the same for the static figures)
  const text = s => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;")
    .replace(/>/g, "&gt;");
  const DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"];
  const SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "cross"];
  for (const chart of data.charts) {
    for (const t of chart.traces) {
      for (const [axis, shift] of Object.entries(t.origin)) {
        t.x[axis] = t.x[axis].map(v => v === null ? null : v + shift);
      }
      for (const [axis, [base, factor]] of Object.entries(t.derived)) {
        if (t.x[base]) t.x[axis] = t.x[base].map(v => v === null ? null : v * factor);
      }
    }
  }
  const select = document.getElementById("rc-axis");
  const had = data.order.filter(a => data.charts.some(c => c.traces.some(t => a in t.x)));
  for (const axis of had) {
    const option = document.createElement("option");
    option.value = axis; option.textContent = data.axes[axis];
    option.selected = axis === data.x; select.appendChild(option);
  }
  const shown = (values, axis) => axis === "wall_time"
    ? values.map(v => v === null ? null : v * 1000) : values;  // a date axis reads ms
  function range(arrays) {
    let lo = Infinity, hi = -Infinity;
    for (const a of arrays) for (const v of a) if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    return hi > lo ? hi - lo : Math.abs(hi) || 1;
  }
  function near(a, b, tol) {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) {
      if ((a[i] === null) !== (b[i] === null)) return false;
      if (a[i] !== null && Math.abs(a[i] - b[i]) > tol) return false;
    }
    return true;
  }
  // runs whose curves coincide on this axis (within 0.3% of the chart's ranges: the same line)
  function coinciding(traces, axis) {
    const tx = 0.003 * range(traces.map(t => t.x[axis]));
    const ty = 0.003 * range(traces.map(t => t.y));
    const groups = [];
    for (const t of traces) {
      const g = groups.find(g => near(g[0].x[axis], t.x[axis], tx) && near(g[0].y, t.y, ty));
      if (g) g.push(t); else groups.push([t]);
    }
    return groups.filter(g => g.length > 1);
  }
  const names = list => list.length < 3 ? list.join(" and ")
    : list.slice(0, -1).join(", ") + " and " + list[list.length - 1];
  const hover = ["step", "samples", "tokens"];
  // the smoothing slider: null draws the report's own smoothing (computed on every point);
  // a share of the x range is an x-aware EMA of the drawn points, worked out here
  let share = null;
  function ema(xs, ys, half) {
    const out = []; let last = null, lastX = null;
    for (let i = 0; i < ys.length; i++) {
      const y = ys[i], x = xs[i];
      if (y === null || x === null || !isFinite(y)) { out.push(y); continue; }
      if (last === null || half <= 0) last = y;
      else last += (1 - Math.pow(2, -(x - lastX) / half)) * (y - last);
      lastX = x; out.push(last);
    }
    return out;
  }
  function smoothed(t, axis, span) {
    return share === null ? t.smoothed : ema(t.x[axis], t.y, share * span);
  }
  function traces(chart, axis, notes) {
    const out = [];
    for (const b of chart.bands) {
      if (!b.x[axis]) { notes.push("The seed band of " + b.group + " is not drawn on " +
        data.axes[axis] + ": its runs do not line up on it."); continue; }
      const x = shown(b.x[axis], axis);
      const band = {type: "scatter", mode: "lines", line: {width: 0}, hoverinfo: "skip",
                    legendgroup: b.group, showlegend: false, x: x};
      out.push(Object.assign({}, band, {y: b.max, name: text(b.group) + " max"}));
      out.push(Object.assign({}, band, {y: b.min, name: text(b.group) + " min",
        fill: "tonexty", fillcolor: "rgba(120,120,120,0.18)"}));
      out.push({type: "scatter", mode: "lines", x: x, y: b.mean, legendgroup: b.group,
                name: text(b.group) + " mean (n=" + b.n + ")",
                line: {dash: "dash", width: 2, color: "#333"}});
    }
    const drawn = chart.traces.filter(t => t.x[axis]);
    const span = range(drawn.map(t => t.x[axis]));
    const missing = chart.traces.filter(t => !t.x[axis]).map(t => t.run);
    if (missing.length) notes.push("Not drawn on " + data.axes[axis] + " (not known for " +
      "these runs): " + names(missing) + ".");
    const bright = drawn.filter(t => top.includes(t.run));
    const faint = drawn.filter(t => !top.includes(t.run));
    const style = new Map();
    for (const group of coinciding(bright, axis)) {
      group.forEach((t, k) => style.set(t.run, k));
      notes.push(names(group.map(t => t.run)) + " coincide on " + data.axes[axis] +
        ": drawn " + names(group.map((t, k) => DASHES[k % DASHES.length])) +
        " to tell them apart.");
    }
    if (faint.length) {
      const x = [], y = [], who = [];
      for (const t of faint) {
        const few = t.y.length <= data.few;
        x.push(...shown(t.x[axis], axis), null);
        y.push(...(few ? t.y : smoothed(t, axis, span)), null);
        who.push(...t.y.map(() => t.run), "");
      }
      out.push({type: "scatter", mode: faint.every(t => t.y.length <= data.few) ? "lines+markers"
                : "lines", x: x, y: y, text: who, name: faint.length + " other runs",
                hovertemplate: "%{text}<br>%{y}<extra></extra>", opacity: 0.35,
                marker: {size: 4, color: "#999"}, line: {width: 1, color: "#999"}});
      notes.push("The " + faint.length + " runs outside the top " + top.length +
        " are drawn faint in grey (smoothed); the leaderboard ranks them.");
    }
    for (const t of bright) {
      const k = style.get(t.run) || 0;
      const x = shown(t.x[axis], axis);
      const customdata = t.y.map((_, j) => hover.map(a => (t.x[a] || [])[j] ?? null));
      const common = {type: "scatter", x: x, customdata: customdata, legendgroup: t.run,
                      hovertemplate: "%{fullData.name}<br>%{y}<br>step %{customdata[0]:,}" +
                        "<br>samples %{customdata[1]:,}<br>tokens %{customdata[2]:,}" +
                        "<extra></extra>"};
      // a coinciding run's line is drawn narrower and dashed over the one before it
      const layered = style.has(t.run);
      const line = {color: colour(t.run), dash: DASHES[k % DASHES.length]};
      const width = layered ? Math.max(5 - 1.5 * k, 1.5) : null;
      if (t.y.length <= data.few) {  // few points: the points as logged, marked
        out.push(Object.assign({}, common, {mode: "lines+markers", y: t.y, name: text(t.run),
          line: Object.assign({width: width || 2}, line),
          marker: {size: layered ? Math.max(12 - 3 * k, 5) : 7, symbol: SYMBOLS[k % SYMBOLS.length],
                   color: colour(t.run)}}));
        continue;
      }
      out.push(Object.assign({}, common, {mode: "lines", y: t.y, name: text(t.run) + " raw",
        showlegend: false, opacity: 0.3, hoverinfo: "skip",
        line: {width: 1, color: colour(t.run)}}));
      out.push(Object.assign({}, common, {mode: "lines", y: smoothed(t, axis, span),
        name: text(t.run),
        line: Object.assign({width: width || 2.5}, line)}));
    }
    return out;
  }
  const narrow = window.matchMedia("(max-width: 640px)");
  const dark = window.matchMedia("(prefers-color-scheme: dark)");
  const theme = () => dark.matches
    ? {paper_bgcolor: "#16181c", plot_bgcolor: "#16181c", font: {color: "#ddd"},
       grid: "#333"} : {paper_bgcolor: "#fff", plot_bgcolor: "#fff", font: {color: "#222"},
       grid: "#e5e5e5"};
  function plot(i, axis) {
    const chart = data.charts[i], id = "chart-" + i, notes = [];
    const log = document.querySelector('input[data-chart="' + i + '"]').checked;
    const label = data.axes[axis];
    const out = traces(chart, axis, notes);
    const look = theme();
    Plotly.react(id, out, {
      title: {text: text(chart.metric) + " against " + text(label), x: 0, xanchor: "left",
              font: {size: i === 0 ? 16 : 13}},
      xaxis: {title: {text: text(label)}, type: axis === "wall_time" ? "date" : "linear",
              automargin: true, gridcolor: look.grid},
      yaxis: {title: {text: text(chart.metric)}, type: log ? "log" : "linear",
              automargin: true, gridcolor: look.grid},
      hovermode: "x unified",  // every run's value at the x under the pointer
      paper_bgcolor: look.paper_bgcolor, plot_bgcolor: look.plot_bgcolor, font: look.font,
      showlegend: i === 0 && !narrow.matches,
      margin: {t: 36, r: 10, b: 10, l: 10}}, {displaylogo: false, responsive: true});
    const caption = document.getElementById("cap-" + i);
    caption.textContent = notes.join(" ");
    caption.dataset.coinciding = notes.some(n => n.includes(" coincide on ")) ? "yes" : "no";
  }
  function draw(axis) { data.charts.forEach((_, i) => plot(i, axis)); }
  select.addEventListener("change", () => draw(select.value));
  narrow.addEventListener("change", () => draw(select.value));
  dark.addEventListener("change", () => draw(select.value));
  const slider = document.getElementById("rc-smooth");
  const told = document.getElementById("rc-smooth-value");
  slider.addEventListener("input", () => {
    share = Number(slider.value) < 0 ? null : Number(slider.value) / 100;
    told.textContent = share === null ? "as computed" : share === 0 ? "none (raw)"
      : "half-life " + slider.value + "% of the range";
    draw(select.value);
  });
  // the leaderboard: a click on a column header sorts by it (again: the other way); the
  // filter keeps the runs whose name holds the text
  const board = document.getElementById("rc-board");
  if (board) {
    const body = board.tBodies[0] || board;
    const rows = () => Array.from(body.rows).filter(r => r.querySelector("td"));
    const cell = (row, i) => {
      const t = row.children[i].textContent.trim().replace(/,/g, "");
      const n = parseFloat(t);
      return isNaN(n) || !/^[-+0-9.]/.test(t) ? t : n;
    };
    Array.from(board.rows[0].children).forEach((th, i) => {
      th.classList.add("sortable"); th.tabIndex = 0;
      const sort = () => {
        const up = th.dataset.sorted !== "up";
        Array.from(board.rows[0].children).forEach(h => delete h.dataset.sorted);
        th.dataset.sorted = up ? "up" : "down";
        const sorted = rows().sort((a, b) => {
          const x = cell(a, i), y = cell(b, i);
          const c = typeof x === "number" && typeof y === "number" ? x - y
            : String(x).localeCompare(String(y), undefined, {numeric: true});
          return up ? c : -c;
        });
        for (const row of sorted) body.appendChild(row);
      };
      th.addEventListener("click", sort);
      th.addEventListener("keydown", e => { if (e.key === "Enter") sort(); });
    });
    const filter = document.getElementById("rc-filter");
    filter.addEventListener("input", () => {
      const want = filter.value.trim().toLowerCase();
      let shown = 0;
      for (const row of rows()) {
        const hit = !want || row.children[1].textContent.toLowerCase().includes(want);
        row.hidden = !hit; shown += hit;
      }
      document.getElementById("rc-filter-count").textContent =
        want ? shown + " of " + rows().length + " runs" : "";
    });
  }
  for (const box of document.querySelectorAll("input.rc-log")) {
    box.addEventListener("change", () => Plotly.relayout("chart-" + box.dataset.chart,
      {"yaxis.type": box.checked ? "log" : "linear"}));
  }
  // a hierarchy number's source: a small popover on click or tap (no hover needed)
  const pop = document.createElement("div");
  pop.id = "rc-pop"; pop.setAttribute("role", "tooltip"); pop.hidden = true;
  document.body.appendChild(pop);
  let anchor = null;
  document.addEventListener("click", event => {
    const button = event.target.closest("button.src");
    if (!button || button === anchor) { pop.hidden = true; anchor = null; return; }
    anchor = button;
    pop.textContent = "Source: " + button.dataset.src;
    pop.hidden = false;
    const box = button.getBoundingClientRect();
    const left = Math.min(box.left + window.scrollX,
                          window.scrollX + document.documentElement.clientWidth - pop.offsetWidth - 8);
    pop.style.left = Math.max(4, left) + "px";
    pop.style.top = box.bottom + window.scrollY + 4 + "px";
  });
  document.addEventListener("keydown", event => {
    if (event.key === "Escape") { pop.hidden = true; anchor = null; }
  });
  draw(data.x);
  if (data.parcoords) {
    const p = data.parcoords;
    const dims = p.dimensions.map(d => {
      const out = {label: text(d.label), values: d.values};
      if (d.ticktext) { out.tickvals = d.tickvals; out.ticktext = d.ticktext.map(text); }
      return out;
    });
    Plotly.react("rc-parcoords", [{type: "parcoords", dimensions: dims,
      line: {color: p.color, colorscale: "Viridis", showscale: true}}],
      {margin: {t: 48, r: 60, b: 24, l: 60}}, {displaylogo: false, responsive: true});
  }
})();
"""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">{generator}
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<meta http-equiv="Content-Security-Policy" content="{csp}">
<style>{style}</style>
<script>{plotly}</script>
</head><body>
{body}
<script type="application/json" id="rc-data">{data}</script>
<script>{script}</script>
</body></html>
"""
