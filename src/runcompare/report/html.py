"""The HTML report: one self-contained file (plotly.js embedded once, no network request),
every string from a log escaped, the same bytes for the same inputs.

The page carries its data as one JSON block and draws the charts in the browser, so the x axis
can be switched in the page without regenerating the report.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from ..analysis import Comparison
from ..display import fmt
from ..model import Run
from .terminal import _LEVELS

__all__ = ["default_report_path", "render_report", "write_report"]

#: Axes the page can switch between, with their labels.
AXIS_LABELS = {"step": "optimizer step", "micro_step": "micro-step", "samples": "samples",
               "tokens": "tokens", "epoch": "epoch", "elapsed": "elapsed seconds"}
_HOVER_AXES = ("step", "samples", "tokens")


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
    """Write the report for ``comparison`` to ``path`` (parent folders made) and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(comparison), encoding="utf-8")
    return path


def render_report(comparison: Comparison) -> str:
    """The whole page as a string."""
    from plotly.offline import get_plotlyjs

    title = " vs ".join(run.name for run in comparison.runs)
    data = {"x": comparison.x, "axes": AXIS_LABELS,
            "charts": [_chart(comparison.runs, metric) for metric in comparison.metrics]}
    body = "\n".join([
        f"<h1>{_e(title)}</h1>",
        f"<p class=note>Compared on <b>{_e(AXIS_LABELS.get(comparison.x, comparison.x))}</b>. "
        "Every logged point is drawn.</p>",
        _batch_table(comparison.runs),
        _findings(comparison),
        _summary(comparison),
        '<p><label>x axis <select id="rc-axis"></select></label></p>',
        "\n".join(f'<div class="chart" id="chart-{i}"></div>'
                  for i in range(len(comparison.metrics))),
        _footer(comparison.runs),
    ])
    return _PAGE.format(title=_e(title), csp=_CSP, style=_STYLE, plotly=get_plotlyjs(),
                        data=_json_for_script(data), script=_SCRIPT, body=body)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _json_for_script(data: Any) -> str:
    """JSON that cannot end the <script> element it sits in."""
    text = json.dumps(data, separators=(",", ":"), sort_keys=True, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _finite(values: list[float | None]) -> list[float | None]:
    return [v if v is not None and math.isfinite(v) else None for v in values]


def _chart(runs: Sequence[Run], metric: str) -> dict[str, Any]:
    traces = []
    for run in runs:
        frame = run.scalars.filter(pl.col("metric") == metric)
        if frame.is_empty():
            continue
        axes = {axis: _finite(frame.get_column(axis).cast(pl.Float64).to_list())
                for axis in AXIS_LABELS if frame.get_column(axis).null_count() < frame.height}
        traces.append({"run": run.name, "x": axes,
                       "y": _finite(frame.get_column("value").to_list())})
    return {"metric": metric, "traces": traces}


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
        f"{_e(f.run + ': ' if f.run else '')}{_e(f.message)}</li>" for f in comparison.finding_list)
    return f"<h2>Findings</h2><ul class=findings>{items}</ul>"


def _summary(comparison: Comparison) -> str:
    if comparison.summary.is_empty():
        return ""
    x = _e(comparison.x)
    rows = "".join(
        f"<tr><td>{_e(r['metric'])}</td><td>{_e(r['run'])}</td><td>{fmt(r['final'])}</td>"
        f"<td>{fmt(r['best'])}</td><td>{fmt(r['at_common_budget'])} "
        f"<small>at {x} {fmt(r['budget'])}</small></td><td>{fmt(r['x_to_target'])} "
        f"<small>to {fmt(r['target'])}</small></td></tr>"
        for r in comparison.summary.iter_rows(named=True))
    return (f"<h2>Summary</h2><table class=summary><tr><th>metric</th><th>run</th>"
            f"<th>final</th><th>best</th><th>at common budget</th><th>{x} to target</th></tr>"
            f"{rows}</table>")


def _footer(runs: Sequence[Run]) -> str:
    from .. import __version__

    paths = "".join(f"<li>{_e(run.name)}: <code>{_e(run.path)}</code> ({_e(run.format)})</li>"
                    for run in runs)
    return f"<footer><p>runcompare {_e(__version__)}</p><ul>{paths}</ul></footer>"


#: No request leaves the page: everything it needs is inline.
_CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; "
        "style-src 'unsafe-inline'; img-src data:")

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px}
td{text-align:right}td[title]{cursor:help}.note{color:#666}
.warning{color:#8a5a00}.error{color:#b00020}.info{color:#555}.chart{height:420px}
footer{margin-top:3em;color:#666;font-size:12px}
"""

_SCRIPT = """
(function () {
  const data = JSON.parse(document.getElementById("rc-data").textContent);
  const select = document.getElementById("rc-axis");
  const shared = Object.keys(data.axes).filter(a => data.charts.every(
    c => c.traces.every(t => a in t.x)));
  for (const axis of shared) {
    const option = document.createElement("option");
    option.value = axis; option.textContent = data.axes[axis];
    option.selected = axis === data.x; select.appendChild(option);
  }
  const hover = ["step", "samples", "tokens"];
  function draw(axis) {
    data.charts.forEach(function (chart, i) {
      const traces = chart.traces.map(t => ({
        type: "scatter", mode: "lines+markers", marker: {size: 4}, name: t.run,
        x: t.x[axis], y: t.y,
        customdata: t.y.map((_, j) => hover.map(a => (t.x[a] || [])[j] ?? null)),
        hovertemplate: "%{fullData.name}<br>%{y}<br>step %{customdata[0]:,}" +
          "<br>samples %{customdata[1]:,}<br>tokens %{customdata[2]:,}<extra></extra>"}));
      Plotly.react("chart-" + i, traces, {
        title: {text: chart.metric}, xaxis: {title: {text: data.axes[axis]}},
        margin: {t: 40, r: 10}, legend: {orientation: "h"}}, {displaylogo: false});
    });
  }
  select.addEventListener("change", () => draw(select.value));
  draw(data.x);
})();
"""

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta http-equiv="Content-Security-Policy" content="{csp}">
<style>{style}</style>
<script>{plotly}</script>
</head><body>
{body}
<script type="application/json" id="rc-data">{data}</script>
<script>{script}</script>
</body></html>
"""
