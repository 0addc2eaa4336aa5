"""Batch science out: terminal tables for ``critical-batch``, ``noise-scale``, ``goodput`` and
``plan``, their charts as plotly figures, and a self-contained HTML page holding them (plotly.js
embedded, no network request; marked like the report, so only an earlier page is replaced).

Every name from a log goes through :func:`~runcompare.display.terminal_text` (terminal) or
:func:`~runcompare.display.plotly_text` (chart text) and ``html.escape`` (page text).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..analysis.critical_batch import CriticalBatch
from ..analysis.goodput import CATEGORIES, Goodput
from ..analysis.noise_scale import NoiseScale
from ..analysis.plan import Plan
from ..display import fmt, plotly_text, terminal_text
from ..model import Finding, Run
from ..outputs import claim, write_atomic
from .assets import CSP, GENERATOR, STYLE, is_report
from .charts import json_for_script
from .sections import boxed

__all__ = ["critical_batch_figure", "critical_batch_section", "figure_section", "goodput_figure",
           "goodput_section",
           "noise_scale_figure", "print_critical_batch", "print_goodput", "print_layouts",
           "print_noise_scale", "report_section", "write_page"]


def _findings(console: Console, findings: Sequence[Finding]) -> None:
    for f in findings:
        console.print(terminal_text(f"{f.level}: {f.message} [{f.code}]"))


def print_critical_batch(cb: CriticalBatch, console: Console) -> None:
    """Steps and samples to target per run, the fit, and B_crit at several targets."""
    table = Table(title=f"To {terminal_text(cb.metric)} = {cb.target:.4g}", title_justify="left")
    for column in ("run", "global batch", "steps to target", "samples to target",
                   "fit residual"):
        table.add_column(column, justify="left" if column == "run" else "right")
    for r in cb.runs:
        residual = cb.residuals.get(r.run)
        table.add_row(terminal_text(r.run), fmt(r.global_batch), fmt(r.steps_to_target),
                      fmt(r.samples_to_target),
                      "—" if residual is None else f"{residual:+.2%}")
    console.print(table)
    how = "exact, two batch sizes" if cb.exact else "least squares"
    console.print(f"S_min {fmt(cb.s_min)} steps, E_min {fmt(cb.e_min)} samples, B_crit = "
                  f"E_min / S_min = {fmt(cb.b_crit)} samples per step ({how}; fitted on "
                  f"global batches {cb.batch_range[0]:,}–{cb.batch_range[1]:,})")
    curve = Table(title="B_crit as the target falls", title_justify="left")
    for column in ("target", "S_min", "E_min", "B_crit"):
        curve.add_column(column, justify="right")
    for fit in cb.curve:
        curve.add_row(f"{fit.target:.4g}", fmt(fit.s_min), fmt(fit.e_min), fmt(fit.b_crit))
    console.print(curve)
    _findings(console, cb.findings)


def print_noise_scale(ns: NoiseScale, console: Console) -> None:
    small, big = ns.runs
    tokens = f" = {fmt(ns.b_simple_tokens)} tokens" if ns.b_simple_tokens is not None else ""
    console.print(terminal_text(
        f"B_simple = tr(Σ)/|G|² = {fmt(ns.b_simple)} sequences{tokens}, from {small} (batch "
        f"{ns.batches[0]:,}) and {big} (batch {ns.batches[1]:,}) on the {ns.x} axis, "
        f"{ns.curve.height} points; |G|² {fmt(ns.grad_sq)}, tr(Σ) {fmt(ns.trace)}"))
    console.print("assumes: " + "; ".join(ns.assumptions))
    _findings(console, ns.findings)


def print_goodput(g: Goodput, console: Console) -> None:
    table = Table(title=terminal_text(f"Wall-clock of {g.run}: {fmt(g.wall_seconds)} s"),
                  title_justify="left")
    table.add_column("where")
    table.add_column("seconds", justify="right")
    table.add_column("share", justify="right")
    for category in CATEGORIES:
        seconds = g.seconds[category]
        table.add_row(category, fmt(seconds),
                      f"{seconds / g.wall_seconds:.1%}" if g.wall_seconds else "—")
    console.print(table)
    unit = "tokens" if g.axis == "tokens" else "samples"
    per_device = f", {fmt(g.rate_per_device)} per device" if g.rate_per_device else ""
    console.print(f"productive fraction {g.productive_fraction:.1%}; training rate "
                  f"{fmt(g.rate)} {unit}/s{per_device}")
    for r in g.restarts:
        console.print(f"restart after step {r['last_step_kept']} (resumed at "
                      f"{r['resumed_at_step']}): {fmt(r['seconds'])} s = lost work "
                      f"{fmt(r['lost_work_seconds'])} s + downtime {fmt(r['downtime_seconds'])} s")
    eta = g.eta()
    if eta is not None:
        console.print(f"budget {fmt(g.budget)} tokens: {eta['hours_ideal']:.1f} h ideal, "
                      f"{fmt(eta['hours_at_goodput'])} h at this run's goodput; remaining "
                      f"{eta['remaining_hours_ideal']:.1f} h ideal, "
                      f"{fmt(eta['remaining_hours_at_goodput'])} h at goodput")
    _findings(console, g.findings)


def print_layouts(p: Plan, console: Console) -> None:
    table = Table(title=f"Global batch {p.global_batch:,} × sequence {p.seq_len:,}",
                  title_justify="left")
    for column in ("way", "devices × micro × accum", "micro-steps", "tokens/step", "hours ideal",
                   "at goodput"):
        table.add_column(column, justify="left" if column == "way" else "right")
    for o in p.options:
        table.add_row(o.name, f"{o.devices:,} × {o.micro_batch} × {o.grad_accum}",
                      fmt(o.micro_steps), fmt(o.tokens_per_step),
                      "—" if o.hours_ideal is None else f"{o.hours_ideal:.1f}",
                      "—" if o.hours_at_goodput is None else f"{o.hours_at_goodput:.1f}")
    console.print(table)
    rate = p.tokens_per_second_per_device
    console.print(terminal_text(f"tokens/s per device: {fmt(rate)} ({p.rate_source}); "
                                f"optimizer steps: {p.options[0].max_steps:,}; tokens: "
                                f"{p.options[0].total_tokens:,}"))
    for o in p.options:
        for note in o.notes:
            console.print(terminal_text(f"{o.name}: {note}"))
    console.print("assumes: " + "; ".join(p.assumptions))
    _findings(console, p.findings)


def critical_batch_figure(cb: CriticalBatch) -> dict[str, Any]:
    """Steps against samples to target, each run a point, and the fitted hyperbola."""
    steps, samples = cb.hyperbola()
    data: list[dict[str, Any]] = [{
        "type": "scatter", "mode": "markers+text", "name": "runs",
        "x": [r.samples_to_target for r in cb.runs], "y": [r.steps_to_target for r in cb.runs],
        "text": [plotly_text(f"{r.run} (B={r.global_batch})") for r in cb.runs],
        "textposition": "top right"}]
    if steps.size:
        data.append({"type": "scatter", "mode": "lines", "name": plotly_text(
            f"(S/S_min−1)(E/E_min−1)=1, B_crit {fmt(cb.b_crit)}"),
            "x": samples.tolist(), "y": steps.tolist()})
    return {"data": data, "layout": {
        "title": {"text": plotly_text(f"Steps and samples to {cb.metric} = {cb.target:.4g}")},
        "xaxis": {"title": {"text": "samples to target"}, "type": "log"},
        "yaxis": {"title": {"text": "optimizer steps to target"}, "type": "log"}}}


def noise_scale_figure(ns: NoiseScale) -> dict[str, Any]:
    curve = ns.curve
    return {"data": [{"type": "scatter", "mode": "lines+markers", "name": "B_simple",
                      "x": curve.get_column("x").to_list(),
                      "y": curve.get_column("b_simple").to_list()}],
            "layout": {"title": {"text": "Simple noise scale over training (sequences)"},
                       "xaxis": {"title": {"text": ns.x}},
                       "yaxis": {"title": {"text": "B_simple"}, "type": "log"}}}


def goodput_figure(g: Goodput) -> dict[str, Any]:
    """Tokens (or samples) per second per device over the wall-clock."""
    unit = "tokens" if g.axis == "tokens" else "samples"
    per = " per device" if g.world_size else ""
    t = g.timeline
    return {"data": [
        {"type": "scatter", "mode": "lines+markers", "name": "training time only",
         "x": t.get_column("elapsed").to_list(), "y": t.get_column("training_rate").to_list()},
        {"type": "scatter", "mode": "lines", "name": "as measured (all time)",
         "x": t.get_column("elapsed").to_list(), "y": t.get_column("measured_rate").to_list()}],
        "layout": {"title": {"text": plotly_text(f"{g.run}: {unit}/s{per}")},
                   "xaxis": {"title": {"text": "wall-clock seconds since the first point"}},
                   "yaxis": {"title": {"text": f"{unit}/s{per}"}}}}


def critical_batch_section(cb: CriticalBatch) -> tuple[str, dict[str, Any]]:
    """The page text (escaped HTML) and figure of a critical-batch fit."""
    rows = "".join(f"<tr><th>{html.escape(r.run)}</th><td>{r.global_batch:,}</td>"
                   f"<td>{fmt(r.steps_to_target)}</td><td>{fmt(r.samples_to_target)}</td>"
                   f"<td>{_residual(cb, r.run)}</td></tr>" for r in cb.runs)
    text = (f"<h2>Critical batch ({html.escape(cb.metric)} = {cb.target:.4g})</h2>"
            + boxed("<table><tr><th>run</th><th>global batch</th><th>steps to target</th>"
                    f"<th>samples to target</th><th>fit residual</th></tr>{rows}</table>")
            + f"<p>S_min {fmt(cb.s_min)} steps, E_min {fmt(cb.e_min)} samples, B_crit "
            f"{fmt(cb.b_crit)} (fitted on global batches {cb.batch_range[0]:,}–"
            f"{cb.batch_range[1]:,}).</p>"
            + "".join(f'<p class="{f.level}">{html.escape(f.message)}</p>' for f in cb.findings))
    return text, critical_batch_figure(cb)


def figure_section(title: str, figure: dict[str, Any],
                   findings: Sequence[Finding] = ()) -> tuple[str, dict[str, Any]]:
    """A page section: a heading, the findings as text, and a figure."""
    notes = "".join(f'<p class="{f.level}">{html.escape(f.message)}</p>' for f in findings)
    return f"<h2>{html.escape(title)}</h2>{notes}", figure


def goodput_section(g: Goodput) -> tuple[str, dict[str, Any]]:
    """The page text (wall-clock by category, restarts, findings) and figure of a goodput."""
    rows = "".join(f"<tr><th>{c}</th><td>{fmt(g.seconds[c])}</td><td>"
                   f"{g.seconds[c] / g.wall_seconds:.1%}</td></tr>" if g.wall_seconds else ""
                   for c in CATEGORIES)
    restarts = "".join(f"<p>Restart after step {r['last_step_kept']} (resumed at "
                       f"{r['resumed_at_step']}): {fmt(r['seconds'])} s = lost work "
                       f"{fmt(r['lost_work_seconds'])} s + downtime "
                       f"{fmt(r['downtime_seconds'])} s.</p>" for r in g.restarts)
    text, figure = figure_section(f"{g.run}: {fmt(g.wall_seconds)} s of wall-clock",
                                  goodput_figure(g), g.findings)
    table = (boxed(f"<table><tr><th>where</th><th>seconds</th><th>share</th></tr>{rows}</table>")
             + f"<p>Productive fraction {g.productive_fraction:.1%}.</p>{restarts}")
    return text + table, figure


def _residual(cb: CriticalBatch, run: str) -> str:
    value = cb.residuals.get(run)
    return "—" if value is None else f"{value:+.2%}"


def report_section(result: CriticalBatch | None) -> str:
    """The compare report's critical-batch section (``""`` for None: the runs differ in more
    than the global batch, :func:`~runcompare.analysis.critical_batch.batch_only_fit`). The
    figure is drawn by its own small script from its own JSON block."""
    if result is None:
        return ""
    text, figure = critical_batch_section(result)
    return (f'<section id="rc-critical-batch">{text}<div class="chart fixed" id="chart-cb"></div>'
            f'<script type="application/json" id="rc-cb-data">{json_for_script(figure)}'
            "</script><script>(function () { const f = JSON.parse(document.getElementById("
            "'rc-cb-data').textContent); Plotly.newPlot('chart-cb', f.data, f.layout, "
            "{responsive: true}); })();</script></section>")


def write_page(path: Path, *, title: str, sections: Sequence[tuple[str, dict[str, Any]]],
               runs: Sequence[Run]) -> Path:
    """A self-contained page of ``sections`` (escaped HTML text, plotly figure) at ``path``."""
    from plotly.offline import get_plotlyjs

    claim(path, runs=runs, what="an HTML page", ours=is_report, fix="choose another --html")
    body = "".join(f'{text}<div class="chart" id="fig-{i}"></div>'
                   for i, (text, _) in enumerate(sections))
    figures = [figure for _, figure in sections]
    page = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{GENERATOR}'
            f"<title>{html.escape(title)}</title>"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<style>{STYLE}</style><script>{get_plotlyjs()}</script></head><body>"
            f"<h1>{html.escape(title)}</h1>{body}"
            f'<script type="application/json" id="rc-data">{json_for_script(figures)}</script>'
            "<script>JSON.parse(document.getElementById('rc-data').textContent).forEach("
            "(f, i) => Plotly.newPlot('fig-' + i, f.data, f.layout, {responsive: true}));"
            "</script></body></html>\n")
    return write_atomic(path, page.encode("utf-8"))
