"""Runs on a common grid of one axis, by linear interpolation inside each run's own range.

The grid is the union of the x values the runs logged (capped at ``max_points`` evenly spaced
values for very long runs); a run contributes nothing outside [its first x, its last x], so no
point is invented beyond what it logged. Every aligned row knows how many runs hold a value
at its x (``n``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from ..model import Run
from .smooth import Smoothing
from .summary import metric_series, series_of

__all__ = ["aggregate", "align", "series"]

ALIGNED_SCHEMA = pl.Schema({
    "metric": pl.String, "x": pl.Float64, "run": pl.String, "value": pl.Float64,
    "smoothed": pl.Float64, "n": pl.UInt32})


def series(run: Run, metric: str, x: str, smoothing: Smoothing | None = None) -> pl.DataFrame:
    """One run's points of ``metric`` sorted by ``x``: columns x, value, smoothed (all points;
    none when it never logged it)."""
    return _columns(metric_series(run, metric, x, smoothing))


def _columns(found: pl.DataFrame | None) -> pl.DataFrame:
    """x, value and smoothed of a :func:`~.summary.metric_series` (none of None)."""
    if found is None:
        return pl.DataFrame(schema={"x": pl.Float64, "value": pl.Float64,
                                    "smoothed": pl.Float64})
    return pl.DataFrame([found.get_column(name) for name in ("x", "value", "smoothed")])


def align(runs: Sequence[Run], *, x: str, metrics: Sequence[str],
          smoothing: Smoothing | None = None, max_points: int = 100_000) -> pl.DataFrame:
    """Long frame: metric, x, run, value, smoothed, n (runs with a value at that x)."""
    parts = [_align_metric(runs, x, metric, smoothing, max_points) for metric in metrics]
    parts = [p for p in parts if not p.is_empty()]
    return pl.concat(parts) if parts else pl.DataFrame(schema=ALIGNED_SCHEMA)


def _align_metric(runs: Sequence[Run], x: str, metric: str, smoothing: Smoothing | None,
                  max_points: int) -> pl.DataFrame:
    pieces = {run.name: _columns(found)
              for run, found in zip(runs, series_of(runs, metric, x, smoothing))}
    pieces = {name: frame for name, frame in pieces.items() if not frame.is_empty()}
    if not pieces:
        return pl.DataFrame(schema=ALIGNED_SCHEMA)
    grid = np.unique(np.concatenate([f.get_column("x").to_numpy() for f in pieces.values()]))
    if grid.size > max_points:
        grid = np.linspace(grid[0], grid[-1], max_points)
    columns: dict[str, list[np.ndarray]] = {"value": [], "smoothed": []}
    for frame in pieces.values():
        xs = frame.get_column("x").to_numpy()
        inside = (grid >= xs[0]) & (grid <= xs[-1])
        for col, out in columns.items():
            out.append(_interp(grid, xs, frame.get_column(col).to_numpy(), inside))
    values = np.stack(columns["value"])
    held = (~np.isnan(values)).sum(axis=0).astype(np.uint32)  # runs with a value at each x
    names = list(pieces)
    return pl.DataFrame({
        "x": np.tile(grid, len(names)),
        "run": pl.Series(names).gather(np.repeat(np.arange(len(names)), grid.size)),
        "value": values.ravel(),
        "smoothed": np.concatenate(columns["smoothed"]),
        "n": np.tile(held, len(names)),
    }).select(pl.lit(metric).alias("metric"), "x", "run",
              pl.col("value", "smoothed").fill_nan(None), "n").cast(ALIGNED_SCHEMA)


def _interp(grid: np.ndarray, xs: np.ndarray, ys: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """Linear interpolation; NaN outside the run's range (and where a neighbour is non-finite)."""
    values: np.ndarray = np.interp(grid, xs, ys.astype(float))
    values[~inside] = np.nan
    return values


def aggregate(aligned: pl.DataFrame, groups: Mapping[str, Sequence[str]]) -> pl.DataFrame:
    """Mean, std, min and max of each group's smoothed values at every x, with n per point."""
    if not groups or aligned.is_empty():
        return pl.DataFrame(schema={"metric": pl.String, "group": pl.String, "x": pl.Float64,
                                    "mean": pl.Float64, "std": pl.Float64, "min": pl.Float64,
                                    "max": pl.Float64, "n": pl.UInt32})
    member = {run: group for group, runs in groups.items() for run in runs}
    value = pl.col("smoothed")
    return (aligned.filter(pl.col("run").is_in(list(member)), value.is_not_null())
            .with_columns(group=pl.col("run").replace_strict(member))
            .group_by("metric", "group", "x", maintain_order=True)
            .agg(mean=value.mean(), std=value.std(), min=value.min(), max=value.max(),
                 n=pl.len().cast(pl.UInt32))
            .sort("metric", "group", "x"))
