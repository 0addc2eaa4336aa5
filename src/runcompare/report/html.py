"""The HTML report: one self-contained file (plotly.js embedded once, no network request),
every string from a log escaped, the same bytes for the same inputs.

Top to bottom: the verdict (the same text as the terminal's first lines and ``--json``),
batch hierarchy (source of each number on hover), findings, the main metric (raw faint,
smoothed bold, seed bands), learning rate against tokens, throughput, the other shared
metrics, the race table of the quality metrics, the schedules and diagnostics (not raced),
the end-of-run totals per run, and a footer with versions and input paths. The page
carries its data as one JSON block and draws the charts in the browser, so the x axis can be
switched in the page without regenerating the report.
"""

from __future__ import annotations

import html
import json
import platform
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..analysis import Comparison
from ..analysis.kinds import QUALITY
from ..display import fmt
from ..model import Run
from ..outputs import claim, head, write_atomic
from .charts import AXIS_LABELS, MAX_POINTS, chart, drawing_smoothing, hidden_points
from .terminal import _LEVELS
from .verdict import verdict

__all__ = ["GENERATOR", "default_report_path", "is_report", "render_report", "write_report"]

_LR = "train/learning_rate"
#: The mark of a report runcompare wrote, in its first KiB: only such a file is replaced.
GENERATOR = '<meta name="generator" content="runcompare">'


def default_report_path(runs: Sequence[Run], folder: Path = Path("reports")) -> Path:
    """``reports/<a>_vs_<b>.html`` (``<a>_vs_<b>_and_N_more.html`` past three runs).

    >>> from types import SimpleNamespace as R
    >>> default_report_path([R(name="mamba"), R(name="attn")]).as_posix()
    'reports/mamba_vs_attn.html'
    """
    names = [re.sub(r"[^A-Za-z0-9._-]+", "_", run.name).strip("_") or "run" for run in runs]
    stem = "_vs_".join(names[:3]) if len(names) <= 3 else \
        f"{'_vs_'.join(names[:2])}_and_{len(names) - 2}_more"
    return folder / f"{stem}.html"


def write_report(comparison: Comparison, path: Path) -> Path:
    """Write the report for ``comparison`` to ``path`` (parent folders made) and return it.

    Raises :class:`~runcompare.errors.InputError` when ``path`` is inside a run being read or
    exists and is not a report runcompare wrote (:func:`~runcompare.outputs.claim`).
    """
    claim(path, runs=comparison.runs, what="an HTML report", ours=is_report,
          fix="choose another --output, or pass --no-report")
    return write_atomic(path, render_report(comparison).encode("utf-8"))


def is_report(path: Path) -> bool:
    """Whether ``path`` is a report runcompare wrote (:data:`GENERATOR` in its first KiB)."""
    return GENERATOR.encode() in head(path, 1024)


def render_report(comparison: Comparison) -> str:
    """The whole page as a string."""
    from plotly.offline import get_plotlyjs

    from .batchsci import report_section

    smoothing = drawing_smoothing(comparison)
    ordered = [m for m in comparison.metrics if m != _LR]
    charts = [chart(comparison, metric, smoothing) for metric in ordered]
    lr = _lr_chart(comparison, smoothing)
    title = " vs ".join(run.name for run in comparison.runs)
    data = {"x": comparison.x, "axes": AXIS_LABELS, "charts": charts, "lr": lr,
            "runs": [run.name for run in comparison.runs]}
    main, others = charts[:1], charts[1:]
    body = "\n".join([
        f"<h1>{_e(title)}</h1>",
        f'<p id="rc-verdict" class="verdict">{_e(verdict(comparison))}</p>',
        _batch_table(comparison.runs),
        _findings(comparison),
        _axis_switch(comparison, smoothing.describe(comparison.x), charts + ([lr] if lr else [])),
        *(f'<h2>{_e(c["metric"])}</h2><div class="chart main" id="chart-{i}"></div>'
          for i, c in enumerate(main)),
        '<h2>Learning rate against tokens</h2><div class="chart" id="chart-lr"></div>' if lr
        else "",
        _throughput(comparison),
        "<h2>Other shared metrics</h2>" if others else "",
        *(f'<div class="chart" id="chart-{i + 1}"></div>' for i in range(len(others))),
        _summary(comparison),
        report_section(comparison.runs),
        _diagnostics(comparison),
        _totals(comparison),
        _footer(comparison.runs),
    ])
    return _PAGE.format(title=_e(title), csp=_CSP, style=_STYLE, plotly=get_plotlyjs(),
                        data=_json_for_script(data), script=_SCRIPT, body=body,
                        generator=GENERATOR)


def _lr_chart(comparison: Comparison, smoothing: Any) -> dict[str, Any] | None:
    if _LR not in comparison.metrics:
        return None
    drawn = chart(comparison, _LR, smoothing)
    axis = "tokens" if all("tokens" in t["x"] for t in drawn["traces"]) else comparison.x
    return {**drawn, "axis": axis}


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _json_for_script(data: Any) -> str:
    """JSON that cannot end the <script> element it sits in."""
    text = json.dumps(data, separators=(",", ":"), sort_keys=True, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _axis_switch(comparison: Comparison, smoothing: str, charts: list[dict[str, Any]]) -> str:
    hidden = hidden_points(charts)
    drawn = (f"Each trace is drawn with at most {MAX_POINTS:,} points (first, last, and the "
             f"minimum and maximum of each bucket): {hidden:,} logged points are not drawn. "
             if hidden else "Every logged point is drawn. ")
    return (f'<p class=note>Compared on <b>{_e(AXIS_LABELS.get(comparison.x, comparison.x))}'
            f"</b>. Faint: values as logged; bold: {_e(smoothing)}, computed on all points. "
            f"{drawn}Smoothing, seed bands and the summary use every point; bands show on "
            f"{_e(comparison.x)} only.</p>"
            '<p><label>x axis <select id="rc-axis"></select></label></p>')


def _batch_table(runs: Sequence[Run]) -> str:
    head = "".join(f"<th>{_e(run.name)}</th>" for run in runs)
    rows = []
    for label, get in _LEVELS:
        cells = "".join(f'<td title="{_e(get(run).source)}">{_e(fmt(get(run).value))}</td>'
                        for run in runs)
        rows.append(f"<tr><th>{_e(label)}</th>{cells}</tr>")
    return (f"<h2>Batch hierarchy</h2><table class=batch><tr><th></th>{head}</tr>"
            f"{''.join(rows)}</table><p class=note>Hover a number for where it came from.</p>")


def _findings(comparison: Comparison) -> str:
    if not comparison.finding_list:
        return "<h2>Findings</h2><p>None.</p>"
    items = "".join(
        f'<li class="{_e(f.level)}"><b>{_e(f.level)}</b> <code>{_e(f.code)}</code> '
        f"{_e(f.run + ': ' if f.run else '')}{_e(f.message)}</li>"
        for f in comparison.finding_list)
    return f"<h2>Findings</h2><ul class=findings>{items}</ul>"


def _throughput(comparison: Comparison) -> str:
    columns = {"samples_per_s": "samples/s", "tokens_per_s": "tokens/s",
               "tokens_per_s_per_device": "tokens/s per device", "mfu": "MFU"}
    head = "".join(f"<th>{label}</th>" for label in columns.values())
    rows = "".join(
        f"<tr><th>{_e(r['run'])}</th>{''.join(f'<td>{fmt(r[c])}</td>' for c in columns)}</tr>"
        for r in comparison.throughput.iter_rows(named=True))
    return f"<h2>Throughput</h2><table><tr><th></th>{head}</tr>{rows}</table>"


def _summary(comparison: Comparison) -> str:
    races = comparison.summary.filter(kind=QUALITY)
    if races.is_empty():
        return ""
    x = _e(comparison.x)
    rows = "".join(
        f"<tr><td>{_e(r['metric'])}</td><td>{_e(r['run'])}</td><td>{fmt(r['final'])}</td>"
        f"<td>{fmt(r['best'])}</td><td>{fmt(r['at_common_budget'])} "
        f"<small>at {x} {fmt(r['budget'])}</small></td><td>{fmt(r['x_to_target'])} "
        f"<small>to {fmt(r['target'])}, {_e(r['curve'] or '')}</small></td>"
        f"<td>{fmt(r['speedup'])}</td><td>{fmt(r['elapsed_to_target'])}</td>"
        f"<td>{fmt(r['elapsed_speedup'])}</td></tr>"
        for r in races.iter_rows(named=True))
    return (f"<h2>Summary</h2><table class=summary><tr><th>metric</th><th>run</th>"
            f"<th>final</th><th>best</th><th>at common budget</th><th>{x} to target</th>"
            f"<th>speedup</th><th>seconds to target</th><th>speedup in seconds</th></tr>{rows}"
            f"</table><p class=note>x to target is where the curve crosses the target, "
            f"interpolated between the two points around it and never extrapolated: on the "
            f"values as logged for eval metrics (raw), on the smoothed curve for per-step "
            f"training metrics (smoothed). Speedups are the first run's crossing ÷ each "
            f"run's.</p>")


def _diagnostics(comparison: Comparison) -> str:
    rows = comparison.summary.filter(kind="diagnostic")
    if rows.is_empty():
        return ""
    body = "".join(
        f"<tr><td>{_e(r['metric'])}</td><td>{_e(r['run'])}</td><td>{fmt(r['final'])}</td>"
        f"<td>{fmt(r['at_common_budget'])}</td></tr>" for r in rows.iter_rows(named=True))
    return ("<h2>Schedules and diagnostics</h2><table class=summary><tr><th>metric</th>"
            f"<th>run</th><th>final</th><th>at common budget</th></tr>{body}</table>"
            "<p class=note>Not raced: a target makes no sense for these.</p>")


def _totals(comparison: Comparison) -> str:
    totals = comparison.totals
    if totals.is_empty():
        return ""
    names = [run.name for run in comparison.runs]
    head = "".join(f"<th>{_e(name)}</th>" for name in names)
    rows = []
    for metric in totals.get_column("metric").unique(maintain_order=True).to_list():
        values = dict(totals.filter(metric=metric).select("run", "value").iter_rows())
        cells = "".join(f"<td>{fmt(values.get(name))}</td>" for name in names)
        rows.append(f"<tr><th>{_e(metric)}</th>{cells}</tr>")
    return (f"<h2>End-of-run totals</h2><table><tr><th></th>{head}</tr>{''.join(rows)}"
            "</table>")


def _footer(runs: Sequence[Run]) -> str:
    from importlib.metadata import version

    from .. import __version__

    versions = ", ".join(f"{name} {version(name)}" for name in ("polars", "plotly"))
    paths = "".join(f"<li>{_e(run.name)}: <code>{_e(run.path)}</code> ({_e(run.format)})</li>"
                    for run in runs)
    return (f"<footer><p>runcompare {_e(__version__)} · Python {platform.python_version()} · "
            f"{_e(versions)}</p><ul>{paths}</ul></footer>")


#: No request leaves the page: everything it needs is inline.
_CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; "
        "style-src 'unsafe-inline'; img-src data:")

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px}
td{text-align:right}td[title]{cursor:help}.note{color:#666}
.verdict{font-size:17px;padding:.6em .8em;background:#f3f6fa;border-left:4px solid #2a6ebb}
.warning{color:#8a5a00}.error{color:#b00020}.info{color:#555}.chart{height:380px}
.chart.main{height:480px}footer{margin-top:3em;color:#666;font-size:12px}
"""

_SCRIPT = """
(function () {
  const data = JSON.parse(document.getElementById("rc-data").textContent);
  const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                   "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  const colour = name => palette[data.runs.indexOf(name) % palette.length];
  // plotly reads titles and trace names as its own small HTML: entities keep them literal
  // text (display.plotly_text does the same for the static figures)
  const text = s => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;")
    .replace(/>/g, "&gt;");
  const select = document.getElementById("rc-axis");
  const all = data.charts.concat(data.lr ? [data.lr] : []);
  for (const chart of all) {
    for (const t of chart.traces) {
      for (const [axis, [base, factor]] of Object.entries(t.derived || {})) {
        t.x[axis] = t.x[base].map(v => v === null ? null : v * factor);
      }
    }
  }
  const shared = Object.keys(data.axes).filter(a => data.charts.every(
    c => c.traces.every(t => a in t.x)));
  for (const axis of shared) {
    const option = document.createElement("option");
    option.value = axis; option.textContent = data.axes[axis];
    option.selected = axis === data.x; select.appendChild(option);
  }
  const hover = ["step", "samples", "tokens"];
  function traces(chart, axis) {
    const out = [];
    if (axis === data.x) {
      for (const b of chart.bands) {
        const band = {type: "scatter", mode: "lines", line: {width: 0}, hoverinfo: "skip",
                      legendgroup: b.group, showlegend: false, x: b.x};
        out.push(Object.assign({}, band, {y: b.max, name: text(b.group) + " max"}));
        out.push(Object.assign({}, band, {y: b.min, name: text(b.group) + " min",
          fill: "tonexty", fillcolor: "rgba(120,120,120,0.18)"}));
        out.push({type: "scatter", mode: "lines", x: b.x, y: b.mean, legendgroup: b.group,
                  name: text(b.group) + " mean (n=" + b.n + ")",
                  line: {dash: "dash", width: 2, color: "#333"}});
      }
    }
    for (const t of chart.traces) {
      const x = t.x[axis];
      const customdata = t.y.map((_, j) => hover.map(a => (t.x[a] || [])[j] ?? null));
      const common = {type: "scatter", x: x, customdata: customdata, legendgroup: t.run,
                      hovertemplate: "%{fullData.name}<br>%{y}<br>step %{customdata[0]:,}" +
                        "<br>samples %{customdata[1]:,}<br>tokens %{customdata[2]:,}" +
                        "<extra></extra>"};
      out.push(Object.assign({}, common, {mode: "lines", y: t.y, name: text(t.run) + " raw",
        showlegend: false, opacity: 0.3, line: {width: 1, color: colour(t.run)}}));
      out.push(Object.assign({}, common, {mode: "lines", y: t.smoothed, name: text(t.run),
        line: {width: 2.5, color: colour(t.run)}}));
    }
    return out;
  }
  function plot(id, chart, axis) {
    Plotly.react(id, traces(chart, axis), {
      title: {text: text(chart.metric)}, xaxis: {title: {text: text(data.axes[axis])}},
      margin: {t: 40, r: 10}, legend: {orientation: "h"}}, {displaylogo: false});
  }
  function draw(axis) {
    data.charts.forEach((chart, i) => plot("chart-" + i, chart, axis));
    if (data.lr) plot("chart-lr", data.lr, data.lr.axis);
  }
  select.addEventListener("change", () => draw(select.value));
  draw(data.x);
})();
"""

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">{generator}<title>{title}</title>
<meta http-equiv="Content-Security-Policy" content="{csp}">
<style>{style}</style>
<script>{plotly}</script>
</head><body>
{body}
<script type="application/json" id="rc-data">{data}</script>
<script>{script}</script>
</body></html>
"""
