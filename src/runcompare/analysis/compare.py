"""Compare runs on one axis: aligned curves, smoothing, seed groups, summary numbers,
end-of-run totals, throughput, the fairness audit and the verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ..audit import audit, axis_fallback, propose_axis
from ..display import did_you_mean, fmt
from ..errors import InputError, UnknownMetricError, UsageError
from ..model import Finding, Findings, Run, require_axes
from .align import aggregate, align
from .critical_batch import CriticalBatch, batch_only_fit
from .differs import Differences, differences
from .groups import auto_groups
from .kinds import QUALITY, TOTAL, metric_kind, metric_kinds
from .select import expand_metrics, is_glob, listed, select_runs
from .smooth import Smoothing, parse_smoothing, smoothing_scale
from .summary import (
    check_metrics,
    draw,
    higher_is_better,
    main_metric,
    shared_metrics,
    summarize,
    throughput,
    totals,
)
from .verdict import Verdict, decide

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = ["Comparison", "choose", "compare", "rank"]

_JSON_SUMMARY = ("run", "metric", "kind", "final", "best", "at_common_budget", "target",
                 "x_to_target", "speedup", "elapsed_to_target", "elapsed_speedup", "curve")
#: The smoothed curve's default half-life: 2% of the x range (drawing and crossings).
_DEFAULT_HALF_LIFE = 0.02


@dataclass
class Comparison:
    """Runs compared on axis ``x``; ``str(comparison)`` is the verdict's text.

    ``verdict``: the answer (:class:`~.verdict.Verdict`); ``summary``: one row per run and
    curve metric (races for quality metrics only); ``totals``: end-of-run values per run;
    ``aligned``: every curve metric of every run on a common grid (value and smoothed, n per
    x); ``bands``: seed-group mean/std/min/max per x (both worked out when first asked for:
    the report draws them, the terminal and ``--json`` do not); ``throughput``: one row per run;
    ``findings``: the audit and every run's findings; ``kinds``: each metric's kind
    (quality, diagnostic, total); ``curve``: the smoothing of the drawn curves and of the
    training metrics' crossings; ``differs``: the hyperparameters whose values differ
    between the runs (:mod:`.differs`).
    """

    runs: list[Run]
    x: str
    metrics: list[str]
    main: str | None
    summary: pl.DataFrame
    throughput: pl.DataFrame
    groups: dict[str, list[str]] = field(default_factory=dict)
    smoothing: Smoothing | None = None
    proposed_axis: str = "step"
    finding_list: list[Finding] = field(default_factory=list)
    verdict: Verdict | None = None
    totals: pl.DataFrame = field(default_factory=pl.DataFrame)
    kinds: dict[str, str] = field(default_factory=dict)
    curve: Smoothing | None = None
    differs: Differences = field(default_factory=Differences)

    def __str__(self) -> str:
        return self.verdict.text if self.verdict is not None else ""

    @cached_property
    def aligned(self) -> pl.DataFrame:
        """Every curve metric of every run on a common grid (:func:`~.align.align`), ``smoothed``
        with the drawn curves' smoothing (the default's too)."""
        return align(self.runs, x=self.x, metrics=self.metrics, smoothing=self.curve)

    @cached_property
    def drawing(self) -> Smoothing:
        """The smoothing of the drawn curves: the comparison's (``curve``, else
        ``smoothing``), else an x-aware EMA with a half-life of 2% of the x range."""
        if self.curve is not None:
            return self.curve
        if self.smoothing is not None:
            return self.smoothing
        return Smoothing("x", 0.0, _DEFAULT_HALF_LIFE).resolved(_x_range(self.runs, self.x) or 1.0)

    def drawn(self, metric: str) -> list[pl.DataFrame]:
        """Each run's points of ``metric`` as the report and the figures draw them, in the
        order of :attr:`runs`: those whose x is known, in x order, with ``smoothed``, the
        curve of :attr:`drawing` (:func:`~.summary.draw`); empty where a run never logged
        it."""
        return draw(self.runs, metric, self.x, self.drawing)

    @cached_property
    def critical_batch(self) -> CriticalBatch | None:
        """The critical-batch fit of the runs when they differ in the global batch and in
        nothing else (:func:`~.critical_batch.batch_only_fit`); None otherwise."""
        return batch_only_fit(self.runs)

    @cached_property
    def bands(self) -> pl.DataFrame:
        """The seed groups' mean, std, min and max per x (:func:`~.align.aggregate`); without
        groups, none (and no curves aligned for them)."""
        return aggregate(self.aligned if self.groups else pl.DataFrame(), self.groups)

    def __repr__(self) -> str:
        """One line: the runs, the axis, the call on the main metric, the sizes."""
        call = self.verdict.call if self.verdict is not None else "no verdict"
        names = ", ".join(run.name for run in self.runs)
        return (f"<Comparison of {names} on {self.x}: {call} on {self.main}; "
                f"{len(self.metrics)} metrics, {len(self.finding_list)} findings>")

    def _repr_html_(self) -> str:
        """The notebook view: the verdict, the hierarchy, the summary, the findings
        (:mod:`runcompare.report.notebook`)."""
        from ..report.notebook import comparison_html

        return comparison_html(self)

    @property
    def findings(self) -> Findings:
        """The audit's and every run's findings (``.to_frame()``: level, code, message, run;
        run null for findings about the comparison as a whole)."""
        return Findings(self.finding_list)

    def figure(self, metric: str | None = None) -> go.Figure:
        """One drawn metric (default: the main one) as a plotly Figure, as the report and
        ``--png`` draw it: per run the values as logged (faint) and smoothed (bold)."""
        import plotly.graph_objects as go

        from ..report.static import figure

        chosen = metric or self.main or (self.metrics[0] if self.metrics else None)
        if chosen is None or chosen not in self.metrics:
            raise UnknownMetricError(f"{chosen!r} is not drawn in this comparison; "
                                     f"{did_you_mean(chosen or '', self.metrics)}drawn: "
                                     f"{', '.join(self.metrics) or 'none'}")
        return go.Figure(figure(self, chosen))

    def write_report(self, path: str | Path) -> Path:
        """Write the HTML report (``runcompare RUN... -o PATH``) and return its path."""
        from ..report.html import write_report

        return write_report(self, Path(path))

    def to_json(self, *, report: str | None = None) -> dict[str, Any]:
        """The object ``runcompare RUN... --json`` prints (docs/architecture.md's contracts); ``report``
        is the path of the HTML report written beside it."""
        return {"x": self.x, "runs": [run.to_json() for run in self.runs],
                "summary": self.summary.select(_JSON_SUMMARY).to_dicts(),
                "totals": self.totals.to_dicts(),
                "findings": [{**f.to_json(), "run": f.run} for f in self.finding_list],
                "verdict": self.verdict.to_dict() if self.verdict is not None else None,
                "throughput": self.throughput.to_dicts(), "differs": self.differs.to_json(),
                "report": report}


def compare(runs: Sequence[Run], *, x: str | None = None, metrics: Sequence[str] | None = None,
            smooth: str | float | Smoothing | None = None, target: float | None = None,
            groups: Mapping[str, Sequence[str]] | bool | None = None) -> Comparison:
    """Compare ``runs`` on axis ``x`` (default: the fair axis the audit proposes).

    ``metrics`` defaults to every metric the runs share (the main one first), and the metrics
    named are raced as quality metrics (a glob such as ``"train/*"`` stands for the metrics it
    matches, each of its own kind, led by the loss); ``smooth`` is ``"tb:0.6"``, a half-life in axis units
    (``"50M"``) or a share of the range (``"5%"``); ``target`` (of the main metric) defaults to
    the worst final value every run reaches; ``groups`` maps a group name to run names (default
    or True: runs identical but for the seed, found automatically; False: no groups).
    """
    plan = _Plan.of(runs, x, metrics, smooth, groups)
    runs, axis = plan.runs, plan.axis
    span = _x_range(runs, axis)
    smoothing = plan.smoothing.resolved(span) if plan.smoothing is not None else None
    curve = smoothing or Smoothing("x", 0.0, _DEFAULT_HALF_LIFE).resolved(span or 1.0)
    findings = (axis_fallback(runs, plan.proposed) if x is None else []) + audit(runs, x=axis) \
        + _scale(plan.smoothing, runs, axis, span) + plan.own
    summary = summarize(runs, x=axis, metrics=plan.curves, target=target, main=plan.main,
                        kinds=plan.kinds, curve=curve)
    return Comparison(runs=runs, x=axis, metrics=plan.curves, main=plan.main, summary=summary,
                      throughput=throughput(runs), groups=plan.groups, smoothing=smoothing,
                      proposed_axis=plan.proposed, finding_list=findings,
                      verdict=plan.verdict(target),
                      totals=totals(runs, [m for m in plan.chosen if plan.kinds[m] == TOTAL]),
                      kinds=plan.kinds, curve=curve, differs=differences(runs))


def rank(runs: Sequence[Run], *, x: str | None = None, metrics: Sequence[str] | None = None,
         smooth: str | float | Smoothing | None = None, target: float | None = None,
         groups: Mapping[str, Sequence[str]] | bool | None = None) -> Verdict:
    """The verdict :func:`compare` gives for these arguments, and nothing else of the
    comparison (no curves aligned, no summary: what ``--top`` ranks a sweep by, in an eighth
    of the time)."""
    return _Plan.of(runs, x, metrics, smooth, groups).verdict(target)


@dataclass
class _Plan:
    """What a comparison of ``runs`` compares: the axis (and the one the audit proposed), the
    metrics chosen and raced (``curves``), the main one, each one's kind, the smoothing asked
    for, the seed groups and the runs' own findings."""

    runs: list[Run]
    axis: str
    proposed: str
    chosen: list[str]
    curves: list[str]
    main: str | None
    kinds: dict[str, str]
    smoothing: Smoothing | None
    groups: dict[str, list[str]]
    auto: bool
    own: list[Finding]
    #: why the main metric is not the usual one, or that it got worse in every run
    note: str | None = None

    @classmethod
    def of(cls, runs: Sequence[Run], x: str | None, metrics: Sequence[str] | None,
           smooth: str | float | Smoothing | None,
           groups: Mapping[str, Sequence[str]] | bool | None) -> _Plan:
        runs = list(runs)
        proposed = propose_axis(runs)
        axis = x or proposed
        require_axes(runs, axis)
        kept = {m for run in runs for m in run.metrics}
        named = [m for m in metrics or () if not is_glob(m, kept)]
        if metrics:
            metrics = expand_metrics(runs, metrics)
            check_metrics(runs, metrics)
        chosen = list(metrics) if metrics else shared_metrics(runs)
        if not chosen and len(runs) > 1:
            logged = "; ".join(f"{run.name}: {', '.join(run.metrics[:8]) or 'none'}"
                               + (" ..." if len(run.metrics) > 8 else "") for run in runs)
            raise InputError(f"the runs share no metric to compare ({logged}); compare runs "
                             "that log the same metric, or name one each has with --metric")
        main = (named[0] if named and chosen[0] == named[0] else _leading(runs, chosen)) \
            if metrics else main_metric(runs)
        main, note = _improving(runs, main, chosen, named)
        kinds = metric_kinds(_points(runs, chosen), named=named + [main or ""])
        return cls(runs=runs, axis=axis, proposed=proposed, chosen=chosen,
                   curves=_ordered([m for m in chosen if kinds[m] != TOTAL], main, kinds),
                   main=main, kinds=kinds,
                   smoothing=smooth if isinstance(smooth, Smoothing) else parse_smoothing(smooth),
                   groups=_groups(runs, groups), auto=groups is None or groups is True,
                   own=[f for run in runs for f in run.findings], note=note)

    def verdict(self, target: float | None) -> Verdict:
        return decide(self.runs, x=self.axis, metric=self.main, target=target,
                      groups=self.groups, smoothing=self.smoothing, findings=self.own,
                      auto_groups=self.auto, note=self.note)


def _worse(runs: Sequence[Run], metric: str) -> dict[str, tuple[float, float]] | None:
    """Each run's first and last logged value of ``metric`` when it got worse over training
    in every run (its last value worse than its first); else None."""
    higher = higher_is_better(metric)
    ends = {}
    for run in runs:
        values = run.points_of(metric).sort("step", maintain_order=True).get_column("value")
        values = values.filter(values.is_finite())
        if values.len() < 2:
            return None
        first, last = float(values[0]), float(values[-1])
        if (last >= first) if higher else (last <= first):
            return None
        ends[run.name] = (first, last)
    return ends


def _improving(runs: Sequence[Run], main: str | None, chosen: Sequence[str],
               named: Sequence[str]) -> tuple[str | None, str | None]:
    """The main metric, moved to another quality metric when it got worse in every run and
    was not named (``--metric``), and the sentence that says so."""
    worse = _worse(runs, main) if main is not None and len(runs) > 1 else None
    if worse is None:
        return main, None
    told = ", ".join(f"{name} {fmt(a)} → {fmt(b)}" for name, (a, b) in list(worse.items())[:4])
    said = (f"{main} got worse over training in every run ({told}{', ...' if len(worse) > 4 else ''}), "
            "so it does not measure what the training improved")
    if main not in named:
        for other in ("train/loss", *chosen):
            if other != main and other in chosen and metric_kind(other) == QUALITY \
                    and _worse(runs, other) is None:
                return other, f"Decided on {other}: {said}."
    return main, f"Note: {said}; the verdict rests on it all the same."


def _groups(runs: Sequence[Run],
            groups: Mapping[str, Sequence[str]] | bool | None) -> dict[str, list[str]]:
    """The seed groups: as given, none (False), or found (None, True: :func:`auto_groups`)."""
    if groups is False:
        return {}
    if groups is None or groups is True:
        return auto_groups(runs)
    return {k: list(v) for k, v in groups.items()}


def _leading(runs: Sequence[Run], chosen: Sequence[str]) -> str:
    """The main metric of a glob's metrics: the one a comparison leads with when it is among
    them (eval loss, else train loss), else the first quality metric, else the first."""
    preferred = main_metric(runs)
    if preferred in chosen:
        return preferred  # type: ignore[return-value]
    return next((m for m in chosen if metric_kind(m) == QUALITY), chosen[0])


def _points(runs: Sequence[Run], metrics: Sequence[str]) -> dict[str, int]:
    """The most points any run logged of each metric."""
    return {metric: max((run.points_of(metric).height for run in runs), default=0)
            for metric in metrics}


def _ordered(metrics: Sequence[str], main: str | None, kinds: Mapping[str, str]) -> list[str]:
    """The main metric, then the other quality metrics, then the diagnostics (each in the
    given order)."""
    rest = [m for m in metrics if m != main]
    head = [main] if main is not None and main in metrics else []
    return head + [m for m in rest if kinds[m] == QUALITY] + [m for m in rest
                                                             if kinds[m] != QUALITY]


def _scale(smoothing: Smoothing | None, runs: Sequence[Run], x: str,
           span: float) -> list[Finding]:
    """A ``smoothing-scale`` warning for a half-life that smooths nothing or everything."""
    if smoothing is None or smoothing.fraction is not None:
        return []
    spacings = []
    for run in runs:
        xs = run.scalars.get_column(x).drop_nulls().unique().sort().cast(pl.Float64).to_numpy()
        if xs.size > 1:
            spacings.append(float(np.median(np.diff(xs))))
    why = smoothing_scale(smoothing, float(np.median(spacings)) if spacings else 0.0, span, x)
    return [Finding("warning", "smoothing-scale", why)] if why else []


def _x_range(runs: Sequence[Run], x: str) -> float:
    """The x range all the runs span together (0 when none has an x)."""
    spans = [run.scalars.get_column(x).cast(pl.Float64) for run in runs]
    values = [(s.min(), s.max()) for s in spans if s.null_count() < len(s)]
    if not values:
        return 0.0
    return float(max(hi for _, hi in values) - min(lo for lo, _ in values))


def choose(runs: Sequence[Run], *, patterns: Sequence[str] = (), top: int | None = None,
           **options: Any) -> Comparison:
    """The :class:`Comparison` of the runs ``patterns`` and ``top`` choose; ``options`` go to
    :func:`compare`. ``patterns`` keep the runs whose name one finds
    (:func:`~.select.select_runs`); with ``top`` the runs are ranked by the verdict of all of
    them (its metric at its common budget, :attr:`~.verdict.Verdict.run_values`) and the best
    ``top`` are compared, plus every run a pattern names: the baseline a sweep is held
    against. Which runs were left out is an info finding, never silent."""
    if top is None:
        return compare(select_runs(runs, patterns) if patterns else runs, **options)
    if top < 1:
        raise UsageError(f"--top {top}: give a number of runs ≥ 1")
    named = select_runs(runs, patterns) if patterns else []
    verdict = rank(runs, **options)  # the verdict alone: a sweep's curves are not aligned
    if not verdict.run_values:
        raise UsageError("--top needs a verdict to rank the runs by, and there is none "
                         f"({verdict}); pick runs with --runs instead")
    best = list(verdict.run_values)[:top]
    keep = set(best) | {run.name for run in named}
    chosen = [run for run in runs if run.name in keep]
    comparison = compare(chosen, **options)
    if len(chosen) == len(runs):
        return comparison
    comparison.finding_list.append(_left_out(runs, best, named, verdict, top))
    return comparison


def _left_out(runs: Sequence[Run], best: list[str], named: Sequence[Run], verdict: Verdict,
              top: int) -> Finding:
    extra = [run.name for run in named if run.name not in best]
    out = [run.name for run in runs if run.name not in best and run.name not in extra]
    plus = f", plus {listed(extra)} named by --runs" if extra else ""
    unranked = len(runs) - len(verdict.run_values)
    why = f" ({unranked} had no value at the budget)" if unranked else ""
    return Finding("info", "top-runs",
                   f"--top {top}: the best {len(best)} of {len(runs)} runs by {verdict.metric} "
                   f"at {verdict.axis} {fmt(verdict.budget)} ({listed(best)}){plus}; "
                   f"{len(out)} left out{why}: {listed(out)}")
