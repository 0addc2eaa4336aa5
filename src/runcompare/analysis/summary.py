"""Summary numbers per run and metric: final, best, value at the common budget, x to target.

The common budget is the largest x every run reaches; values there are interpolated linearly
between a run's own points, never extrapolated. The default target is the worst final value
among the runs, so every run reaches it and ``x_to_target`` compares how fast.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from ..errors import UnknownMetricError
from ..model import Run, require_axis

__all__ = ["fair_axis", "higher_is_better", "main_metric", "shared_metrics", "summarize"]

#: Name fragments of metrics where higher is better (everything else is minimised, like loss).
_HIGHER = ("acc", "f1", "bleu", "rouge", "exact_match", "score", "auc", "precision", "recall",
           "mfu", "per_second", "tflops", "tps")


def higher_is_better(metric: str) -> bool:
    """Whether a larger value of ``metric`` is better (accuracy) rather than worse (loss).

    >>> higher_is_better("eval/accuracy"), higher_is_better("train/loss")
    (True, False)
    """
    leaf = metric.rsplit("/", 1)[-1].lower()
    return any(part in leaf for part in _HIGHER)


def shared_metrics(runs: Sequence[Run]) -> list[str]:
    """Metrics every run logged, in sorted order."""
    common = set(runs[0].metrics)
    for run in runs[1:]:
        common &= set(run.metrics)
    return sorted(common)


def main_metric(runs: Sequence[Run]) -> str | None:
    """The metric a comparison leads with: eval loss if every run has it, else train loss."""
    shared = shared_metrics(runs)
    for metric in ("eval/loss", "train/loss"):
        if metric in shared:
            return metric
    return shared[0] if shared else None


def check_metrics(runs: Sequence[Run], metrics: Sequence[str]) -> None:
    """Raise :class:`UnknownMetricError` for a metric no run logged, listing those there are."""
    available = sorted({m for run in runs for m in run.metrics})
    for metric in metrics:
        if metric not in available:
            raise UnknownMetricError(f"no run logged metric {metric!r}; available: "
                                     f"{', '.join(available)}")


def fair_axis(runs: Sequence[Run]) -> str:
    """Tokens when every run has them, else samples, else optimizer steps."""
    for axis in ("tokens", "samples"):
        if all(run.scalars.get_column(axis).null_count() < run.scalars.height for run in runs):
            return axis
    return "step"


def summarize(runs: Sequence[Run], *, x: str, metrics: Sequence[str],
              target: float | None = None) -> pl.DataFrame:
    """One row per run and metric: run, metric, final, best, at_common_budget, x_to_target,
    with the budget and target used in ``budget`` and ``target`` columns."""
    for run in runs:
        require_axis(run, x)
    rows = []
    for metric in metrics:
        series = [_series(run, metric, x) for run in runs]
        present = [s for s in series if s is not None and len(s[0])]
        budget = min(float(xs[-1]) for xs, _ in present) if present else None
        finals = [float(vs[-1]) for _, vs in present]
        goal = target if target is not None else _worst(finals, metric)
        for run, item in zip(runs, series):
            rows.append(_row(run.name, metric, item, budget, goal))
    return pl.DataFrame(rows, schema={"run": pl.String, "metric": pl.String,
                                      "final": pl.Float64, "best": pl.Float64,
                                      "at_common_budget": pl.Float64, "x_to_target": pl.Float64,
                                      "budget": pl.Float64, "target": pl.Float64}, orient="row")


def _series(run: Run, metric: str, x: str) -> tuple[np.ndarray, np.ndarray] | None:
    frame = (run.frame(x).filter(pl.col("metric") == metric, pl.col("x").is_not_null())
             .sort("x", maintain_order=True))
    if frame.is_empty() and metric not in run.metrics:
        return None
    return frame.get_column("x").to_numpy(), frame.get_column("value").to_numpy()


def _worst(finals: list[float], metric: str) -> float | None:
    finite = [v for v in finals if np.isfinite(v)]
    if not finite:
        return None
    return min(finite) if higher_is_better(metric) else max(finite)


def _row(run: str, metric: str, item: tuple[np.ndarray, np.ndarray] | None,
         budget: float | None, goal: float | None) -> tuple[object, ...]:
    if item is None or not len(item[0]):
        return (run, metric, None, None, None, None, budget, goal)
    xs, values = item
    finite = np.isfinite(values)
    best = None
    if finite.any():
        best = float(values[finite].max() if higher_is_better(metric) else values[finite].min())
    at_budget = None
    if budget is not None and finite.any() and xs[finite][0] <= budget:
        at_budget = float(np.interp(budget, xs[finite], values[finite]))
    return (run, metric, float(values[-1]), best, at_budget, _x_to(xs, values, goal, metric),
            budget, goal)


def _x_to(xs: np.ndarray, values: np.ndarray, goal: float | None, metric: str) -> float | None:
    """The first x at which the metric reaches ``goal`` (as logged, no smoothing)."""
    if goal is None:
        return None
    with np.errstate(invalid="ignore"):
        hit = values >= goal if higher_is_better(metric) else values <= goal
    index = np.flatnonzero(hit)
    return float(xs[index[0]]) if index.size else None
