"""The HTML report: one self-contained file (plotly.js embedded once, no network request),
every string from a log escaped, the same bytes for the same inputs, readable from 420 px wide.

Top to bottom: the title (the runs' names, or "N runs" past :data:`SWEEP` runs), the headline
and the key numbers as cards, the x-axis switch and the main metric's chart (the first screen,
at 1400×900 and at 420 px wide), the verdict in full folded below it (the same text as the
terminal's and ``--json``), the batch hierarchy (each
number's source in a popover, rows where the runs differ marked) or, for a sweep, the
leaderboard (runs ranked by the verdict's metric at the common budget, with their hierarchy
and the hyperparameters that differ), else "what differs" (the hyperparameters that differ,
keys down); then a grid of small multiples (the
learning rate first, then the other quality metrics and the diagnostics), each with its log-y
toggle and a caption naming curves that coincide; then findings (grouped by code in a sweep),
the end-of-run totals, the race table of the quality metrics, the schedules and diagnostics,
throughput, and a footer with versions and input paths. The page carries its data as one JSON
block and draws the charts in the browser, so the x axis can be switched in the page without
regenerating the report. In a sweep the :data:`TOP` best runs are drawn in colour and the
rest faint; drawing keeps to a budget of points (:mod:`.charts`), disclosed in the page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..analysis import Comparison
from ..model import Run
from ..outputs import claim, write_atomic
from . import sections
from .assets import CSP, GENERATOR, PAGE, SCRIPT, STYLE, is_report
from .batchsci import report_section
from .charts import (
    AXIS_LABELS,
    FEW_POINTS,
    MAX_POINTS,
    PALETTE,
    TOTAL_POINTS,
    chart,
    hidden_points,
    json_for_script,
    limits,
)
from .parcoords import AXES, parcoords
from .sections import e
from .verdict import verdict

__all__ = ["SWEEP", "TOP", "default_report_path", "render_report", "write_report"]

_LR = "train/learning_rate"
#: Past this many runs the report is a sweep's: a leaderboard, the best runs in colour.
SWEEP = 8
#: Runs drawn in colour in a sweep.
TOP = 8


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


def render_report(comparison: Comparison) -> str:
    """The whole page as a string."""
    from plotly.offline import get_plotlyjs

    names = [run.name for run in comparison.runs]
    sweep = len(names) > SWEEP
    top = _top(comparison) if sweep else names
    metrics = _chart_order(comparison)
    limit = limits(metrics, names, top)
    charts = [chart(comparison, m, {n: limit[(m, n)] for n in names})
              for m in metrics]
    title = f"{len(names)} runs" if sweep else " vs ".join(names)
    lines = parcoords(comparison) if sweep else None
    data = {"x": comparison.x, "axes": AXIS_LABELS, "order": list(AXIS_LABELS),
            "charts": charts, "runs": names, "top": top, "palette": list(PALETTE),
            "few": FEW_POINTS, "parcoords": lines}
    body = "\n".join([
        f"<h1>{e(title)}</h1>",
        _glance(comparison),
        _controls(comparison, charts, top),
        *(_figure(i, c) for i, c in enumerate(charts[:1])),
        _prose(comparison),
        _pointer(comparison),
        sections.leaderboard(comparison, top, PALETTE) + _parcoords(lines) if sweep
        else sections.batch_table(comparison.runs) + sections.differs(comparison),
        _drawing(comparison, comparison.drawing.describe(comparison.x), charts, top),
        '<div class="grid">' + "".join(_figure(i + 1, c) for i, c in enumerate(charts[1:]))
        + "</div>" if len(charts) > 1 else "",
        sections.findings(comparison, grouped=sweep),
        sections.totals(comparison),
        sections.summary(comparison),
        report_section(comparison.critical_batch),
        sections.diagnostics(comparison),
        sections.throughput(comparison),
        sections.footer(comparison.runs),
    ])
    return PAGE.format(title=e(title), csp=CSP, style=STYLE, plotly=get_plotlyjs(),
                       data=json_for_script(data), script=SCRIPT, body=body,
                       generator=GENERATOR)


def _top(comparison: Comparison) -> list[str]:
    """The runs drawn in colour in a sweep: the best :data:`TOP` at the budget (then the
    first runs given, when fewer have a value)."""
    ranked = list(comparison.verdict.run_values) if comparison.verdict is not None else []
    rest = [run.name for run in comparison.runs if run.name not in ranked]
    return (ranked + rest)[:TOP]


def _chart_order(comparison: Comparison) -> list[str]:
    """The main metric, the learning rate, then the others in the comparison's order."""
    metrics = list(comparison.metrics)
    head = metrics[:1]
    lr = [_LR] if _LR in metrics[1:] else []
    return head + lr + [m for m in metrics[1:] if m != _LR]


def _figure(i: int, drawn: dict[str, Any]) -> str:
    main = ' class="main"' if i == 0 else ""
    return (f'<figure{main}><div class="tools"><label><input type="checkbox" class="rc-log" '
            f'data-chart="{i}"> log y</label></div><div class="chart" id="chart-{i}" '
            f'aria-label="{e(drawn["metric"])}"></div><figcaption id="cap-{i}"></figcaption>'
            "</figure>")


def _parcoords(lines: dict[str, Any] | None) -> str:
    """The sweep's hyperparameters against the verdict's metric, one line per run."""
    if lines is None:
        return ""
    left = (f" {lines['left_out']} more differing keys are not drawn (some runs lack them, "
            f"or past {AXES} axes); the leaderboard has them." if lines["left_out"] else "")
    return (f"<h2>Hyperparameters against {e(lines['metric'])}</h2>"
            f'<div class="chart" id="rc-parcoords" aria-label="parallel coordinates"></div>'
            f"<p class=note>One line per run with a value at the budget, through the "
            f"hyperparameters that differ, coloured by {e(lines['metric'])} at the budget (the "
            f"last axis). Drag along an axis to pick runs.{e(left)}</p>")


def _pointer(comparison: Comparison) -> str:
    """How many findings there are, linked: the verdict's caveats are in its own words."""
    levels = [f.level for f in comparison.finding_list]
    if not levels:
        return "<p class=note>No findings.</p>"
    counts = ", ".join(f"{levels.count(level)} {level}{'s' if levels.count(level) != 1 else ''}"
                       for level in ("error", "warning", "info") if level in levels)
    return f'<p class=note>Findings: <a href="#findings">{counts}</a>.</p>'


def _glance(comparison: Comparison) -> str:
    """The headline and the key numbers as cards: the first screen's answer."""
    found = comparison.verdict
    if found is None:
        return ""
    cards = "".join(f'<div class="card"><div class="label">{e(c["label"])}</div>'
                    f'<div class="value">{e(c["value"])}</div>'
                    f'<div class="detail">{e(c["detail"])}</div></div>'
                    for c in found.key_numbers)
    return (f'<p id="rc-headline" class="headline call-{e(found.call)}">{e(found.headline)}</p>'
            + (f'<div class="cards">{cards}</div>' if cards else ""))


def _prose(comparison: Comparison) -> str:
    """The verdict in full, folded under the first chart (the same text as the terminal's and
    ``--json``'s)."""
    return (f'<details class="prose"><summary>The verdict in full: the noise, the race, the '
            f'cost and the axis</summary><p id="rc-verdict" class="verdict">'
            f"{e(verdict(comparison))}</p></details>")


def _controls(comparison: Comparison, charts: list[dict[str, Any]], top: list[str]) -> str:
    """The x-axis switch and the runs' colours, just above the main chart."""
    faint = len(comparison.runs) - len(top)
    key = "".join(f'<span><span class="swatch" style="background:{PALETTE[i % len(PALETTE)]}">'
                  f"</span>{e(name)}</span>" for i, name in enumerate(top))
    if faint:
        key += f'<span><span class="swatch faint"></span>{faint} other runs</span>'
    return (f'<div class="controls"><label>x axis <select id="rc-axis">'
            f'</select></label><span class="note">compared on '
            f"<b>{e(AXIS_LABELS.get(comparison.x, comparison.x))}</b></span>"
            f'<label>smoothing <input type="range" id="rc-smooth" min="-1" max="20" '
            f'step="0.5" value="-1" aria-label="smoothing"></label>'
            f'<span class="note" id="rc-smooth-value">as computed</span>'
            f'<div class="key">{key}</div></div>')


def _drawing(comparison: Comparison, smoothing: str, charts: list[dict[str, Any]],
             top: list[str]) -> str:
    """How the curves are drawn: smoothing, downsampling, the sweep's colours."""
    hidden = hidden_points(charts)
    logged = sum(t["points"] for c in charts for t in c["traces"])
    drawn = (f"Drawing keeps at most {MAX_POINTS:,} points a trace and {TOTAL_POINTS:,} in the "
             f"whole report (first, last, and the minimum and maximum of each stretch, so "
             f"spikes stay): {hidden:,} of the {logged:,} logged points are not drawn. "
             if hidden else "Every logged point is drawn. ")
    faint = len(comparison.runs) - len(top)
    sweep = (f"The {len(top)} best runs at the budget are drawn in colour, the other {faint} "
             "faint in grey. " if faint else "")
    return (f"<h2>Curves</h2><p class=note>Faint: values as logged; bold: {e(smoothing)}, "
            f"computed on all points; a trace of up to {FEW_POINTS} points is drawn as its "
            f"points. {sweep}{drawn}Smoothing, seed bands and every number use every point; "
            "the verdict reads training metrics off a local linear fit of the raw points. The "
            "smoothing slider redraws the bold curves with an EMA of the drawn points whose "
            "half-life is that share of the range (leftmost: as computed; 0: the raw points); "
            "it changes no number.</p>")
