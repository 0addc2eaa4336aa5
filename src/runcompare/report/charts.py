"""What the report's charts draw: every run's points on every axis, raw and smoothed, reduced
for drawing only.

Values are drawn to 7 significant digits. Device-hours are not carried as numbers: the page
multiplies each trace's elapsed seconds by its world size ÷ 3600, as the tidy frame does; so
are FLOPs that are tokens × one number (its tokens times that number). A trace longer than :data:`MAX_POINTS` is drawn
from the first and last point and the minimum and maximum of each of ``MAX_POINTS // 2``
buckets, so spikes and dips stay visible; smoothing runs on all points before that, and the
summary numbers never see the reduction.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from ..analysis import Comparison
from ..analysis.align import series
from ..analysis.smooth import Smoothing
from ..model import Run

__all__ = ["AXIS_LABELS", "MAX_POINTS", "chart", "downsample", "drawing_smoothing"]

MAX_POINTS = 2_000

#: Axes the page can switch between, with their labels.
AXIS_LABELS = {"step": "optimizer step", "micro_step": "micro-step", "samples": "samples",
               "tokens": "tokens", "epoch": "epoch", "elapsed": "elapsed seconds",
               "flops": "training FLOPs", "device_hours": "device-hours"}


def downsample(values: np.ndarray, limit: int = MAX_POINTS) -> np.ndarray:
    """Indices to draw: all when few, else first, last and each bucket's min and max.

    >>> downsample(np.array([0., 5, 1, 1, -3, 1, 1, 2]), limit=4).tolist()
    [0, 1, 4, 7]
    """
    n = values.size
    if n <= limit:
        return np.arange(n)
    buckets = max(limit // 2, 1)
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)
    finite = np.where(np.isfinite(values), values, np.nan)
    keep = [np.array([0, n - 1])]
    for start, end in itertools.pairwise(edges):
        chunk = finite[start:end]
        if chunk.size and not np.isnan(chunk).all():
            keep.append(np.array([start + np.nanargmin(chunk), start + np.nanargmax(chunk)]))
        elif chunk.size:  # non-finite only: keep one so the gap shows
            keep.append(np.array([start]))
    return np.unique(np.concatenate(keep))


def drawing_smoothing(comparison: Comparison) -> Smoothing:
    """The comparison's smoothing, else an x-aware EMA with a half-life of 2% of the range
    (the curve on which training metrics cross their targets, ``comparison.curve``)."""
    if comparison.curve is not None:
        return comparison.curve
    if comparison.smoothing is not None:
        return comparison.smoothing
    xs = pl.concat([r.scalars.get_column(comparison.x).cast(pl.Float64) for r in comparison.runs])
    span = (xs.max() or 0.0) - (xs.min() or 0.0)  # type: ignore[operator]
    return Smoothing("x", 0.0, 0.02).resolved(float(span) if span else 1.0)


def _clean(values: np.ndarray) -> list[float | int | None]:
    """JSON-ready values for drawing: non-finite as null (a gap), whole numbers as integers,
    others to 7 significant digits (float32 precision, finer than a chart or hover shows)."""
    return [None if not math.isfinite(v) else int(v) if v.is_integer() and abs(v) < 2**53
            else float(f"{v:.7g}") for v in values.astype(float).tolist()]


def chart(comparison: Comparison, metric: str, smoothing: Smoothing) -> dict[str, Any]:
    """One chart: a trace per run (every axis it has, raw and smoothed y), bands per group."""
    traces = [t for run in comparison.runs if (t := _trace(run, metric, comparison.x, smoothing))]
    bands = comparison.bands.filter(pl.col("metric") == metric)
    return {"metric": metric, "traces": traces,
            "bands": [_band(bands.filter(pl.col("group") == g), g)
                      for g in bands.get_column("group").unique(maintain_order=True).to_list()]}


def _trace(run: Run, metric: str, x: str, smoothing: Smoothing) -> dict[str, Any] | None:
    points = (run.scalars.filter(pl.col("metric") == metric, pl.col(x).is_not_null())
              .sort(x, maintain_order=True))
    if points.is_empty():
        return None
    smoothed = series(run, metric, x, smoothing).get_column("smoothed").to_numpy()
    values = points.get_column("value").to_numpy()
    keep = downsample(values)
    world = run.batch.world_size.value
    derived: dict[str, list[object]] = {}
    if world is not None and points.get_column("device_hours").null_count() < points.height:
        derived["device_hours"] = ["elapsed", world / 3600]  # drawn as elapsed × this
    per_token = _per_token(points)
    if per_token is not None:
        derived["flops"] = ["tokens", per_token]
    axes = {axis: _clean(points.get_column(axis).cast(pl.Float64).to_numpy()[keep])
            for axis in AXIS_LABELS
            if axis not in derived and points.get_column(axis).null_count() < points.height}
    return {"run": run.name, "points": points.height, "x": axes, "derived": derived,
            "y": _clean(values[keep]), "smoothed": _clean(smoothed[keep])}


def _per_token(points: pl.DataFrame) -> float | None:
    """FLOPs per token when every point's FLOPs are tokens × one number (a stated
    flops_per_token, HF's total_flos spread over tokens), else None."""
    both = points.select("tokens", "flops").drop_nulls()
    if both.height < points.height or both.is_empty():
        return None
    tokens = both.get_column("tokens").cast(pl.Float64).to_numpy()
    flops = both.get_column("flops").to_numpy()
    if (tokens <= 0).any():
        return None
    ratio = flops / tokens
    return float(ratio[0]) if np.allclose(ratio, ratio[0], rtol=1e-12, atol=0) else None


def _band(frame: pl.DataFrame, group: str) -> dict[str, Any]:
    keep = downsample(frame.get_column("mean").to_numpy())
    column = {c: _clean(frame.get_column(c).to_numpy()[keep]) for c in ("x", "mean", "min", "max")}
    return {"group": group, "n": int(frame.get_column("n").max() or 0), **column}


def hidden_points(charts: Sequence[dict[str, Any]]) -> int:
    """How many logged points the drawing leaves out, over every trace."""
    return sum(t["points"] - len(t["y"]) for c in charts for t in c["traces"])
