"""Summary numbers per run and metric: final, best, value at the common budget, x to target,
speedup and wall time to target; throughput per run.

The common budget is the largest x every run reaches; values there are interpolated linearly
between a run's own points, never extrapolated. The default target is the worst final value
among the runs, so every run reaches it and ``x_to_target`` compares how fast. ``speedup`` is
the first run's x to target ÷ this run's (2.0 = reaches the target on half the x).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from ..errors import UnknownMetricError
from ..model import Run, require_axis

__all__ = ["fair_axis", "higher_is_better", "main_metric", "shared_metrics", "summarize",
           "throughput"]

SUMMARY_SCHEMA = {"run": pl.String, "metric": pl.String, "final": pl.Float64,
                  "best": pl.Float64, "at_common_budget": pl.Float64, "x_to_target": pl.Float64,
                  "speedup": pl.Float64, "elapsed_to_target": pl.Float64,
                  "budget": pl.Float64, "target": pl.Float64}

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
    """One row per run and metric (:data:`SUMMARY_SCHEMA`), with the budget and target used."""
    for run in runs:
        require_axis(run, x)
    rows = []
    for metric in metrics:
        series = [_series(run, metric, x) for run in runs]
        present = [s for s in series if s is not None and len(s[0])]
        budget = min(float(s[0][-1]) for s in present) if present else None
        finals = [float(s[1][-1]) for s in present]
        goal = target if target is not None else _worst(finals, metric)
        metric_rows = [_row(run.name, metric, item, budget, goal)
                       for run, item in zip(runs, series)]
        base = metric_rows[0][5] if metric_rows else None
        for row in metric_rows:
            speedup = base / row[5] if base is not None and row[5] else None
            rows.append((*row[:6], speedup, *row[6:]))
    return pl.DataFrame(rows, schema=SUMMARY_SCHEMA, orient="row")


def throughput(runs: Sequence[Run]) -> pl.DataFrame:
    """Per run: samples/s, tokens/s, tokens/s per device and mean MFU, where the logs allow.

    Rates come from the logged wall clock (samples or tokens between the first and the last
    timed point ÷ the seconds between them), else from the Trainer's final
    ``train_samples_per_second``.
    """
    rows = []
    for run in runs:
        samples_rate, tokens_rate = _rate(run, "samples"), _rate(run, "tokens")
        logged = run.facts.get("train_samples_per_second")
        if samples_rate is None and logged is not None:
            samples_rate = float(logged.value)
        seq_len = run.batch.seq_len.value
        if tokens_rate is None and samples_rate is not None and seq_len:
            tokens_rate = samples_rate * seq_len
        world = run.batch.world_size.value
        per_device = tokens_rate / world if tokens_rate is not None and world else None
        mfu = (run.scalars.filter(pl.col("metric").str.contains("mfu"),
                                  pl.col("value").is_finite(), pl.col("value") >= 0)
               .get_column("value").mean())
        rows.append((run.name, samples_rate, tokens_rate, per_device, mfu))
    return pl.DataFrame(rows, orient="row", schema={
        "run": pl.String, "samples_per_s": pl.Float64, "tokens_per_s": pl.Float64,
        "tokens_per_s_per_device": pl.Float64, "mfu": pl.Float64})


def _rate(run: Run, axis: str) -> float | None:
    """Units of ``axis`` per second between the first and the last point with both known."""
    timed = run.scalars.filter(pl.col("elapsed").is_not_null(), pl.col(axis).is_not_null())
    if timed.height < 2:
        return None
    ends = timed.select(pl.col(axis).min().alias("a0"), pl.col(axis).max().alias("a1"),
                        pl.col("elapsed").min().alias("t0"), pl.col("elapsed").max().alias("t1"))
    a0, a1, t0, t1 = ends.row(0)
    return (a1 - a0) / (t1 - t0) if t1 > t0 and a1 > a0 else None


def _series(run: Run, metric: str,
            x: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    frame = (run.scalars.lazy().filter(pl.col("metric") == metric)
             .with_columns(pl.col(x).cast(pl.Float64).alias("x"))
             .filter(pl.col("x").is_not_null()).sort("x", maintain_order=True).collect())
    if frame.is_empty() and metric not in run.metrics:
        return None
    return (frame.get_column("x").to_numpy(), frame.get_column("value").to_numpy(),
            frame.get_column("elapsed").cast(pl.Float64).to_numpy())


def _worst(finals: list[float], metric: str) -> float | None:
    finite = [v for v in finals if np.isfinite(v)]
    if not finite:
        return None
    return min(finite) if higher_is_better(metric) else max(finite)


def _row(run: str, metric: str, item: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
         budget: float | None, goal: float | None) -> tuple[object, ...]:
    """run, metric, final, best, at_common_budget, x_to_target, elapsed_to_target, budget,
    target (speedup is added across runs)."""
    if item is None or not len(item[0]):
        return (run, metric, None, None, None, None, None, budget, goal)
    xs, values, elapsed = item
    finite = np.isfinite(values)
    best = None
    if finite.any():
        best = float(values[finite].max() if higher_is_better(metric) else values[finite].min())
    at_budget = None
    if budget is not None and finite.any() and xs[finite][0] <= budget:
        at_budget = float(np.interp(budget, xs[finite], values[finite]))
    hit = _first_hit(values, goal, metric)
    x_to = None if hit is None else float(xs[hit])
    wall = None if hit is None or not np.isfinite(elapsed[hit]) else float(elapsed[hit])
    return (run, metric, float(values[-1]), best, at_budget, x_to, wall, budget, goal)


def _first_hit(values: np.ndarray, goal: float | None, metric: str) -> int | None:
    """Index of the first point at which the metric reaches ``goal`` (as logged)."""
    if goal is None:
        return None
    with np.errstate(invalid="ignore"):
        hit = values >= goal if higher_is_better(metric) else values <= goal
    index = np.flatnonzero(hit)
    return int(index[0]) if index.size else None
