"""Summary numbers per run and metric: final, best, value at the common budget, x to target,
speedup and wall time to target; end-of-run totals and throughput per run.

The common budget is the largest x every run reaches; values there are interpolated linearly
between a run's own points, never extrapolated. Races (target, x to target, speedups) are run
for quality metrics only (see :mod:`.kinds`); diagnostics get their final value and the value
at the budget. The target is ``target`` for the main metric, else the worst final value among
the runs, so every run reaches it and ``x_to_target`` compares how fast. ``x_to_target`` is
where the run's curve crosses the target, interpolated between the two points around it
(:func:`~.crossing.crossing`): on the smoothed curve for per-step training metrics, on the
values as logged for eval metrics (``curve`` says which). ``speedup`` is the first run's x to
target ÷ this run's (2.0 = reaches the target on half the x); ``elapsed_speedup`` the same in
wall-clock seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

import numpy as np
import polars as pl

from ..display import did_you_mean
from ..errors import UnknownMetricError
from ..model import Run, require_axes
from .crossing import at_position, crossing
from .fit import fit_width, metric_value, run_curve
from .kinds import QUALITY, TOTAL, is_eval
from .smooth import Smoothing, smooth_expr

__all__ = ["draw", "drawn_points", "fair_axis", "higher_is_better", "main_metric", "metric_series",
           "ordered_points", "series_of", "shared_metrics", "summarize", "throughput", "totals"]

SUMMARY_SCHEMA = {"run": pl.String, "metric": pl.String, "kind": pl.String, "final": pl.Float64,
                  "best": pl.Float64, "at_common_budget": pl.Float64, "x_to_target": pl.Float64,
                  "speedup": pl.Float64, "elapsed_to_target": pl.Float64,
                  "elapsed_speedup": pl.Float64, "budget": pl.Float64, "target": pl.Float64,
                  "curve": pl.String}

TOTALS_SCHEMA = {"run": pl.String, "metric": pl.String, "value": pl.Float64, "step": pl.Int64}

#: Name fragments of metrics where higher is better (everything else is minimised, like loss).
_HIGHER = ("acc", "f1", "bleu", "rouge", "exact_match", "score", "auc", "precision", "recall",
           "mfu", "per_second", "tflops", "tps", "reward")


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
            raise UnknownMetricError(f"no run logged metric {metric!r}; "
                                     f"{did_you_mean(metric, available)}available: "
                                     f"{', '.join(available)}")


def fair_axis(runs: Sequence[Run]) -> str:
    """Tokens when every run has them, else samples, else optimizer steps."""
    for axis in ("tokens", "samples"):
        if all(run.scalars.get_column(axis).null_count() < run.scalars.height for run in runs):
            return axis
    return "step"


def summarize(runs: Sequence[Run], *, x: str, metrics: Sequence[str],
              target: float | None = None, main: str | None = None,
              kinds: Mapping[str, str] | None = None,
              curve: Smoothing | None = None) -> pl.DataFrame:
    """One row per run and metric (:data:`SUMMARY_SCHEMA`), with the budget and target used.

    ``kinds`` maps metrics to their kind (default: all quality); ``curve`` is the smoothing of
    the curve on which training metrics cross their target (default: the values as logged).
    """
    require_axes(runs, x)
    rows: list[tuple[object, ...]] = []
    for metric in metrics:
        kind = (kinds or {}).get(metric, QUALITY)
        if kind == TOTAL:
            continue
        series = series_of(runs, metric, x, None if is_eval(metric) else curve)
        present = [s for s in series if s is not None and s.height]
        budget = min(s.get_column("x")[-1] for s in present) if present else None
        width = fit_width(curve, [s.get_column("x").to_numpy() for s in present])
        read = metric if kind == QUALITY else "eval/"  # diagnostics: as logged
        curves = [None if s is None or not s.height else run_curve(run, s, metric, x, width,
                                                                    read=read)
                  for run, s in zip(runs, series)]
        goal = None
        if kind == QUALITY:
            goal = target if target is not None and metric == main else _worst(
                [c[np.isfinite(c)][-1] for c in curves if c is not None and np.isfinite(c).any()],
                metric)
        metric_rows = [_row(run.name, metric, kind, item, budget, goal, values, width)
                       for run, item, values in zip(runs, series, curves)]
        rows += _with_speedups(metric_rows)
    return pl.DataFrame(rows, schema=SUMMARY_SCHEMA, orient="row")


def metric_series(run: Run, metric: str, x: str,
                  smoothing: Smoothing | None = None) -> pl.DataFrame | None:
    """One run's points of ``metric`` sorted by ``x``: x, value, smoothed (``value`` when
    ``smoothing`` is None), elapsed, flops, device_hours; None when the run never logged it.

    Made of the columns, with no query for polars to plan (0.2 ms a run); a smoothed curve
    is the one :func:`drawn_points` works out once per run, metric, axis and smoothing, which
    the summary, the verdict, the aligned curves and the charts all read (a 400-run compare
    and its report smoothed each of their 2,000 curves four times)."""
    if run.points_of(metric).is_empty():
        return None
    points = ordered_points(run, metric, x) if smoothing is None else \
        drawn_points(run, metric, x, smoothing)
    smoothed = points.get_column("value" if smoothing is None else "smoothed")
    return pl.DataFrame([points.get_column(x).cast(pl.Float64).alias("x"),
                         *(points.get_column(c) for c in _SERIES), smoothed.alias("smoothed")])


def series_of(runs: Sequence[Run], metric: str, x: str,
              smoothing: Smoothing | None = None) -> list[pl.DataFrame | None]:
    """Each run's :func:`metric_series`, in order, the smoothed curves worked out together
    (:func:`draw`)."""
    if smoothing is not None:
        draw([run for run in runs if not run.points_of(metric).is_empty()], metric, x,
             smoothing)
    return [metric_series(run, metric, x, smoothing) for run in runs]


def ordered_points(run: Run, metric: str, x: str) -> pl.DataFrame:
    """A run's points of ``metric`` whose ``x`` is known, in ``x`` order (points at the same x
    keep the order they were logged in)."""
    points = run.points_of(metric)
    if points.get_column(x).null_count():
        points = points.filter(pl.col(x).is_not_null())
    # points in step order are seldom out of x order; the sort puts NaN last, and is eager
    # (a lazy sort of a few thousand rows takes five times as long)
    xs = points.get_column(x).cast(pl.Float64).to_numpy()
    if not (xs[1:] >= xs[:-1]).all():
        points = points.sort(x, maintain_order=True)
    return points


def drawn_points(run: Run, metric: str, x: str, smoothing: Smoothing) -> pl.DataFrame:
    """A run's points of ``metric`` as a chart draws them: :func:`ordered_points` with
    ``smoothed``, the curve ``smoothing`` makes of them (worked out once per run, metric, axis
    and smoothing; :func:`draw` works out many runs' at once)."""
    return draw([run], metric, x, smoothing)[0]


def draw(runs: Sequence[Run], metric: str, x: str, smoothing: Smoothing) -> list[pl.DataFrame]:
    """Each run's :func:`drawn_points` of ``metric``, in order: the curves not worked out yet
    are smoothed together in one query, each on its own (``over`` the run: the same numbers
    as a query for each). A query smoothing 2,000 points takes about 0.2 ms, nearly all of it
    the query's own cost, and a 400-run sweep's summary and charts smooth 2,000 curves."""
    key = ("drawn", metric, x, smoothing)
    todo = [run for run in runs if run.memoized(key) is None]
    if todo:
        parts = [ordered_points(run, metric, x) for run in todo]
        for run, part, smoothed in zip(todo, parts, _smoothed(parts, x, smoothing)):
            run.memo(key, partial(part.hstack, [smoothed]))
    return [run.memoized(key) for run in runs]


def _smoothed(parts: Sequence[pl.DataFrame], x: str, smoothing: Smoothing) -> list[pl.Series]:
    """Each frame's curve ``smoothed`` (:func:`~.smooth.smooth_expr` of its ``value`` by its
    ``x``), the frames' curves worked out in one query, each on its own."""
    heights = [part.height for part in parts]
    which = pl.Series("part", np.repeat(np.arange(len(parts), dtype=np.int32), heights))
    joined = pl.DataFrame([pl.concat([part.get_column(x) for part in parts]),
                           pl.concat([part.get_column("value") for part in parts]), which])
    curve = joined.select(smooth_expr(smoothing, x=x).over("part").alias("smoothed")).to_series()
    starts = np.cumsum([0, *heights[:-1]]).tolist()
    return [curve.slice(start, height) for start, height in zip(starts, heights)]


#: A metric series' columns besides x and smoothed, as in the run's points.
_SERIES = ("value", "elapsed", "flops", "device_hours")


def totals(runs: Sequence[Run], metrics: Sequence[str]) -> pl.DataFrame:
    """End-of-run values: per run and metric, the last value logged and its step."""
    rows = []
    for metric in dict.fromkeys(metrics):
        for run in runs:
            points = run.points_of(metric)
            if points.is_empty():
                continue
            steps = points.get_column("step").to_numpy()
            last = steps.size - 1 - int(np.argmax(steps[::-1]))  # the last point of the last step
            rows.append((run.name, metric, points.get_column("value")[last], int(steps[last])))
    return pl.DataFrame(rows, schema=TOTALS_SCHEMA, orient="row")


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
        if samples_rate is None and logged is not None and logged.value is not None:
            samples_rate = float(logged.value)
        seq_len = run.batch.seq_len.value
        if tokens_rate is None and samples_rate is not None and seq_len:
            tokens_rate = samples_rate * seq_len
        world = run.batch.world_size.value
        per_device = tokens_rate / world if tokens_rate is not None and world else None
        logged_mfu = [run.points_of(m).get_column("value") for m in run.metrics if "mfu" in m]
        mfu = None
        if logged_mfu:
            values = pl.concat(logged_mfu)
            mfu = values.filter(values.is_finite() & (values >= 0)).mean()
        rows.append((run.name, samples_rate, tokens_rate, per_device, mfu))
    return pl.DataFrame(rows, orient="row", schema={
        "run": pl.String, "samples_per_s": pl.Float64, "tokens_per_s": pl.Float64,
        "tokens_per_s_per_device": pl.Float64, "mfu": pl.Float64})


def _rate(run: Run, axis: str) -> float | None:
    """Units of ``axis`` per second between the first and the last point with both known."""
    elapsed, counted = run.scalars.get_column("elapsed"), run.scalars.get_column(axis)
    if elapsed.null_count() == elapsed.len() or counted.null_count() == counted.len():
        return None  # a run without wall times (trainer_state.json): no frame to filter
    timed = elapsed.is_not_null() & counted.is_not_null()
    elapsed, counted = elapsed.filter(timed), counted.filter(timed)
    if elapsed.len() < 2:
        return None
    a0, a1, t0, t1 = counted.min(), counted.max(), elapsed.min(), elapsed.max()
    return (a1 - a0) / (t1 - t0) if t1 > t0 and a1 > a0 else None


def _worst(finals: list[float], metric: str) -> float | None:
    finite = [v for v in finals if np.isfinite(v)]
    if not finite:
        return None
    return min(finite) if higher_is_better(metric) else max(finite)


def _row(run: str, metric: str, kind: str, frame: pl.DataFrame | None, budget: float | None,
         goal: float | None, read: np.ndarray | None, width: float) -> tuple[object, ...]:
    """run, metric, kind, final, best, at_common_budget, x_to_target, elapsed_to_target,
    budget, target, curve (the speedups are added across runs). ``read`` is the curve the
    crossing and the value at the budget are read off (:func:`.fit.metric_curve`)."""
    curve = None if goal is None else "raw" if is_eval(metric) else "local-fit"
    if frame is None or not frame.height or read is None:
        return (run, metric, kind, None, None, None, None, None, budget, goal, curve)
    xs, values = frame.get_column("x").to_numpy(), frame.get_column("value").to_numpy()
    finite = np.isfinite(values)
    best = None
    if finite.any() and kind == QUALITY:
        best = float(values[finite].max() if higher_is_better(metric) else values[finite].min())
    at_budget = metric_value(xs, values, metric if kind == QUALITY else "eval/", budget, width)
    position = crossing(read, goal, higher=higher_is_better(metric))
    x_to = at_position(xs, position)
    wall = at_position(frame.get_column("elapsed").to_numpy(), position)
    return (run, metric, kind, float(values[-1]), best, at_budget, x_to, wall, budget, goal,
            curve)


def _with_speedups(rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """Each row with the first run's x (and seconds) to target ÷ its own inserted; none where
    either is 0 (a run that starts past the target took no x to reach it: no ratio says how
    much sooner), or unknown."""
    if not rows:
        return []
    base_x, base_wall = rows[0][6], rows[0][7]
    out = []
    for row in rows:
        x_to, wall = row[6], row[7]
        speedup = base_x / x_to if base_x and x_to else None  # type: ignore[operator]
        faster = base_wall / wall if base_wall and wall else None  # type: ignore[operator]
        out.append((*row[:7], speedup, wall, faster, *row[8:]))
    return out
