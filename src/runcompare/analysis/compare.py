"""Compare runs on one axis: the metrics they share, the summary numbers, the findings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ..model import Finding, Run, require_axis
from .summary import check_metrics, fair_axis, main_metric, shared_metrics, summarize

__all__ = ["Comparison", "compare"]


@dataclass
class Comparison:
    """Runs compared on axis ``x``; ``summary`` has one row per run and metric."""

    runs: list[Run]
    x: str
    metrics: list[str]
    main: str | None
    summary: pl.DataFrame
    findings: list[Finding] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The object ``runcompare RUN... --json`` prints (DESIGN.md's contract)."""
        columns = ["run", "metric", "final", "best", "at_common_budget", "x_to_target"]
        return {"x": self.x, "runs": [run.to_json() for run in self.runs],
                "summary": self.summary.select(columns).to_dicts(),
                "findings": [{**f.to_json(), "run": f.run} for f in self.findings]}


def compare(runs: Sequence[Run], *, x: str | None = None, metrics: Sequence[str] | None = None,
            target: float | None = None) -> Comparison:
    """Compare ``runs`` on axis ``x`` (default: the fairest axis every run has).

    ``metrics`` defaults to every metric the runs share; ``target`` to the worst final value.
    """
    runs = list(runs)
    axis = x or fair_axis(runs)
    for run in runs:
        require_axis(run, axis)
    if metrics:
        check_metrics(runs, metrics)
    chosen = list(metrics) if metrics else shared_metrics(runs)
    main = chosen[0] if metrics else main_metric(runs)
    if main is not None and main in chosen:
        chosen = [main, *(m for m in chosen if m != main)]
    summary = summarize(runs, x=axis, metrics=chosen, target=target)
    findings = [f for run in runs for f in run.findings]
    return Comparison(runs=runs, x=axis, metrics=chosen, main=main, summary=summary,
                      findings=findings)
