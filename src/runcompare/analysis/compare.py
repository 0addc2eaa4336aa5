"""Compare runs on one axis: aligned curves, smoothing, seed groups, summary numbers,
throughput, and the fairness audit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ..audit import audit, propose_axis
from ..model import Finding, Run, require_axis
from .align import aggregate, align
from .groups import auto_groups
from .smooth import Smoothing, parse_smoothing
from .summary import check_metrics, main_metric, shared_metrics, summarize, throughput

__all__ = ["Comparison", "compare"]

_JSON_SUMMARY = ("run", "metric", "final", "best", "at_common_budget", "x_to_target",
                 "speedup", "elapsed_to_target")


@dataclass
class Comparison:
    """Runs compared on axis ``x``.

    ``summary``: one row per run and metric; ``aligned``: every metric of every run on a common
    grid (value and smoothed, n per x); ``bands``: seed-group mean/std/min/max per x;
    ``throughput``: one row per run; ``findings``: the audit and every run's findings.
    """

    runs: list[Run]
    x: str
    metrics: list[str]
    main: str | None
    summary: pl.DataFrame
    aligned: pl.DataFrame
    throughput: pl.DataFrame
    groups: dict[str, list[str]] = field(default_factory=dict)
    bands: pl.DataFrame = field(default_factory=pl.DataFrame)
    smoothing: Smoothing | None = None
    proposed_axis: str = "step"
    finding_list: list[Finding] = field(default_factory=list)

    @property
    def findings(self) -> pl.DataFrame:
        """level, code, message, run (null for findings about the comparison as a whole)."""
        return pl.DataFrame([(f.level, f.code, f.message, f.run) for f in self.finding_list],
                            schema={"level": pl.String, "code": pl.String,
                                    "message": pl.String, "run": pl.String}, orient="row")

    def to_json(self) -> dict[str, Any]:
        """The object ``runcompare RUN... --json`` prints (DESIGN.md's contract)."""
        return {"x": self.x, "runs": [run.to_json() for run in self.runs],
                "summary": self.summary.select(_JSON_SUMMARY).to_dicts(),
                "findings": [{**f.to_json(), "run": f.run} for f in self.finding_list]}


def compare(runs: Sequence[Run], *, x: str | None = None, metrics: Sequence[str] | None = None,
            smooth: str | float | Smoothing | None = None, target: float | None = None,
            groups: Mapping[str, Sequence[str]] | None = None) -> Comparison:
    """Compare ``runs`` on axis ``x`` (default: the fair axis the audit proposes).

    ``metrics`` defaults to every metric the runs share (the main one first); ``smooth`` is
    ``"tb:0.6"``, a half-life in axis units (``"50M"``) or a share of the range (``"5%"``);
    ``target`` defaults to the worst final value; ``groups`` maps a group name to run names
    (default: runs identical but for the seed).
    """
    runs = list(runs)
    proposed = propose_axis(runs)
    axis = x or proposed
    for run in runs:
        require_axis(run, axis)
    if metrics:
        check_metrics(runs, metrics)
    chosen = list(metrics) if metrics else shared_metrics(runs)
    main = chosen[0] if metrics else main_metric(runs)
    if main is not None and main in chosen:
        chosen = [main, *(m for m in chosen if m != main)]
    smoothing = smooth if isinstance(smooth, Smoothing) else parse_smoothing(smooth)
    if smoothing is not None:
        smoothing = smoothing.resolved(_x_range(runs, axis))
    aligned = align(runs, x=axis, metrics=chosen, smoothing=smoothing)
    grouping = {k: list(v) for k, v in groups.items()} if groups else auto_groups(runs)
    findings = audit(runs, x=axis) + [f for run in runs for f in run.findings]
    return Comparison(runs=runs, x=axis, metrics=chosen, main=main,
                      summary=summarize(runs, x=axis, metrics=chosen, target=target),
                      aligned=aligned, throughput=throughput(runs), groups=grouping,
                      bands=aggregate(aligned, grouping), smoothing=smoothing,
                      proposed_axis=proposed, finding_list=findings)


def _x_range(runs: Sequence[Run], x: str) -> float:
    spans = [run.scalars.get_column(x).cast(pl.Float64) for run in runs]
    values = [(s.min(), s.max()) for s in spans if s.null_count() < len(s)]
    if not values:
        return 0.0
    return float(max(hi for _, hi in values) - min(lo for lo, _ in values))  # type: ignore[operator]
