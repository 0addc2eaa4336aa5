"""The notebook view of a run and of a comparison (their ``_repr_html_``): the verdict, the
batch hierarchy with the source of each number on hover, the summary and the findings. Small
HTML without scripts or styles of its own; every string from a log escaped."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..display import fmt
from .terminal import levels

if TYPE_CHECKING:
    from ..analysis import Comparison
    from ..model import Finding, Run

__all__ = ["comparison_html", "run_html"]

_SHOWN_METRICS = 20


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _hierarchy(runs: Sequence[Run]) -> str:
    head = "".join(f"<th>{_e(run.name)}</th>" for run in runs)
    rows = "".join(
        f"<tr><th style='text-align:left'>{_e(label)}</th>"
        + "".join(f'<td title="{_e(get(run).source)}">{_e(fmt(get(run).value))}</td>'
                  for run in runs) + "</tr>"
        for label, get in levels(runs))
    return f"<table><tr><th>batch hierarchy</th>{head}</tr>{rows}</table>"


def _findings(findings: Sequence[Finding]) -> str:
    if not findings:
        return "<p>No findings.</p>"
    items = "".join(f"<li><b>{_e(f.level)}</b> <code>{_e(f.code)}</code> "
                    f"{_e(f.run + ': ' if f.run else '')}{_e(f.message)}</li>" for f in findings)
    return f"<details><summary>{len(findings)} findings</summary><ul>{items}</ul></details>"


def run_html(run: Run) -> str:
    """One run: name, format and size, the hierarchy (hover a number for its source), the
    metrics and the findings."""
    metrics = run.metrics
    more = f" and {len(metrics) - _SHOWN_METRICS} more" if len(metrics) > _SHOWN_METRICS else ""
    return (f"<div class='runcompare-run'><p><b>{_e(run.name)}</b> ({_e(run.format)}, "
            f"{_e(run.path)}): {run.optimizer_steps:,} optimizer steps, "
            f"{run.scalars.height:,} points</p>{_hierarchy([run])}"
            f"<p>metrics: {_e(', '.join(metrics[:_SHOWN_METRICS]))}{more}</p>"
            f"{_findings(run.findings)}</div>")


def comparison_html(comparison: Comparison) -> str:
    """A comparison: the verdict, the hierarchy side by side, the race summary of the
    quality metrics and the findings."""
    races = comparison.summary.filter(kind="quality")
    x = _e(comparison.x)
    rows = "".join(
        f"<tr><td>{_e(r['metric'])}</td><td>{_e(r['run'])}</td><td>{fmt(r['final'])}</td>"
        f"<td>{fmt(r['best'])}</td><td>{fmt(r['at_common_budget'])}</td>"
        f"<td>{fmt(r['x_to_target'])}</td></tr>" for r in races.iter_rows(named=True))
    summary = (f"<table><tr><th>metric</th><th>run</th><th>final</th><th>best</th>"
               f"<th>at common budget</th><th>{x} to target</th></tr>{rows}</table>"
               if rows else "")
    return (f"<div class='runcompare-comparison'><p><b>{_e(str(comparison))}</b></p>"
            f"{_hierarchy(comparison.runs)}{summary}{_findings(comparison.findings)}</div>")
