"""Put a source's raw points on every axis: optimizer step, micro-step, samples, tokens, epoch,
wall time, elapsed time, training FLOPs and device-hours.

Logged counters win over the schedule: ``train/num_input_tokens_seen`` gives tokens and
``train/consumed_samples`` samples (and, × sequence length, tokens) at the steps where they
were logged; elsewhere samples and tokens come from the (possibly ramped) global batch. Never
``step × final batch`` on a ramp.

FLOPs (cumulative training FLOPs over all devices) come from a stated ``flops_per_token`` ×
tokens, else from a logged FLOP counter (:data:`FLOP_COUNTERS`; the HF Trainer's
``total_flos``, logged once at the end, is spread linearly over the tokens before it), never
from a model name and never past the counter's last point. Device-hours are elapsed seconds ×
world size ÷ 3600.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from .display import fmt
from .errors import MissingInfoError
from .legs import leg_numbers
from .model import (
    AXIS_METRICS,
    KEPT_COUNTERS,
    SCALAR_SCHEMA,
    BatchConfig,
    Fact,
    RawLog,
    framed,
    repeated,
    with_constants,
)

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

__all__ = ["FLOP_COUNTERS", "axis_sources", "flops_at", "normalize", "schedule"]

#: Logged metrics that count cumulative training FLOPs, the preferred first.
FLOP_COUNTERS = ("train/total_flos", "train/total_flops", "train/cumulative_flops")


def axis_sources(raw: RawLog, batch: BatchConfig, *, facts: Mapping[str, Fact[Any]] | None = None,
                 wall_times: str | None = None) -> dict[str, str]:
    """Where each derived axis of a run comes from: samples and tokens (a logged counter or
    the schedule), elapsed (``wall_times``: who logged them), FLOPs and device-hours."""
    logged = set(raw.metric_codes()[0].to_list())
    out = _count_sources(raw, batch, logged)
    if wall_times is not None:
        out["elapsed"] = f"{wall_times}; seconds since the first logged point"
        world = batch.world_size
        if world.value is not None:
            out["device_hours"] = (f"elapsed × world size {world.value} ({world.source}) "
                                   "÷ 3600")
    flops = _flops_source(raw, facts or {}, "tokens" in out, logged)
    if flops is not None:
        out["flops"] = flops
    return out


def _count_sources(raw: RawLog, batch: BatchConfig, logged: set[str]) -> dict[str, str]:
    out = {}
    for column, per_step in (("samples", batch.global_batch), ("tokens", batch.tokens_per_step)):
        counter = next((m for m, c in AXIS_METRICS.items() if c == column and m in logged),
                       None)
        samples = "train/consumed_samples"
        if counter is not None:
            out[column] = f"logged counter {raw.aliases.get(counter, counter)}"
        elif column == "tokens" and samples in logged and batch.seq_len.value is not None:
            out[column] = f"logged counter {raw.aliases.get(samples, samples)} × seq_len"
        elif per_step.value is not None:
            per = "global_batch" if column == "samples" else "tokens_per_step"
            out[column] = f"schedule: step × {per}"
    return out


def _flops_source(raw: RawLog, facts: Mapping[str, Fact[Any]], tokens: bool,
                  logged: set[str]) -> str | None:
    per_token = facts.get("flops_per_token")
    if per_token is not None and per_token.value is not None:
        return (f"flops_per_token {fmt(per_token.value)} ({per_token.source}) × tokens"
                if tokens else None)
    counter = next((name for name in FLOP_COUNTERS if name in logged), None)
    if counter is None:
        return None
    named = raw.aliases.get(counter, counter)
    return (f"logged counter {named} ({raw.source}), spread linearly over the tokens "
            "before each logged value" if tokens else
            f"logged counter {named} ({raw.source}), spread linearly over the steps")


def flops_at(at: np.ndarray, xs: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Cumulative FLOPs at positions ``at`` of an axis from a counter logged at ``xs``:
    linear from (0, 0) through each logged point, NaN past the last one (never extrapolated)
    and where the counter is not cumulative (it ever decreases).

    >>> flops_at(np.array([0., 51_200, 102_400, 110_000]), np.array([102_400.]),
    ...          np.array([5.5561e10])).tolist()
    [0.0, 27780500000.0, 55561000000.0, nan]
    """
    order = np.argsort(xs, kind="stable")
    xs, counts = xs[order].astype(float), counts[order].astype(float)
    keep = np.isfinite(xs) & np.isfinite(counts)
    xs, counts = xs[keep], counts[keep]
    if not xs.size or (np.diff(counts) < 0).any() or (counts < 0).any():
        return np.full(at.shape, np.nan)
    if xs[0] > 0:
        xs, counts = np.concatenate([[0.0], xs]), np.concatenate([[0.0], counts])
    out: np.ndarray = np.interp(at, xs, counts)
    out[~(at <= xs[-1])] = np.nan  # past the last count, or no position at all
    return out


def normalize(raw: RawLog, batch: BatchConfig, *, run: str,
              facts: Mapping[str, Fact[Any]] | None = None) -> pl.DataFrame:
    """The tidy frame of :data:`SCALAR_SCHEMA` for one run: every raw point, all axes.

    Worked in numpy over the points' metric codes (a handful of polars calls a run, not one
    per column: a sweep normalizes hundreds of runs), then built as one frame, ordered by
    metric and then step; the sort is stable, so points logged at the same step keep the
    source's time order.
    """
    scalars = raw.scalars
    names, codes = raw.metric_codes()
    metrics = names.to_list()
    steps = _optimizer_step(raw, batch, run, scalars.get_column("step").to_numpy())
    values = scalars.get_column("value").to_numpy()
    kept = np.flatnonzero(~_among(codes, [i for i, m in enumerate(metrics)
                                          if m in AXIS_METRICS and m not in KEPT_COUNTERS],
                                  len(metrics)))
    kept = kept[_by_metric_then_step(codes[kept], steps[kept], len(metrics))]
    step = steps[kept]
    logged = {column: _logged(codes, steps, values, step, len(metrics),
                              [i for i, m in enumerate(metrics) if AXIS_METRICS.get(m) == column])
              for column in ("epoch", "samples", "tokens")}
    epoch = logged["epoch"]
    accum = batch.grad_accum.value
    samples_at, tokens_at = schedule(batch, step)
    if raw.step_unit == "epoch":  # the step counts epochs: no schedule puts it on samples
        accum, samples_at, tokens_at = None, None, None
        epoch = _first(epoch, _Column(step.astype(float), None))
    samples = _first(_rounded(logged["samples"]), _Column.of(samples_at))
    seq_len = batch.seq_len.value
    counted = _rounded(logged["samples"])
    by_samples = (None if seq_len is None or counted.values is None else  # ≤ 64 bits
                  _Column(counted.values * seq_len,
                          (counted.values <= np.iinfo(np.int64).max // seq_len)
                          & (True if counted.valid is None else counted.valid)))
    tokens = _first(_rounded(logged["tokens"]), by_samples, _Column.of(tokens_at))
    wall = scalars.get_column("wall_time")
    wall = (repeated(None, kept.size, wall.dtype) if wall.null_count() == wall.len() else
            wall.gather(kept))
    elapsed = _elapsed(wall, scalars.get_column("leg").to_numpy()[kept])
    world = batch.world_size.value
    flops = _flops(codes[kept], metrics, step, values[kept], tokens, facts or {})
    hours = _Column(None if world is None or elapsed.values is None
                    else elapsed.values * world / 3600, elapsed.valid)
    micro = _Column.of(None if accum is None else step * accum)
    size = kept.size
    return with_constants(framed({
        "run": repeated(None, size, pl.String),  # the run's name, below
        "metric": names[codes[kept]],  # a gather without gather's query (a sixth the cost)
        "value": values[kept],
        "step": step,
        "micro_step": micro.series(pl.Int64, size),
        "samples": samples.series(pl.Int64, size),
        "tokens": tokens.series(pl.Int64, size),
        "epoch": epoch.series(pl.Float64, size),
        "wall_time": wall,
        "elapsed": elapsed.series(pl.Float64, size),
        "flops": flops.series(pl.Float64, size),
        "device_hours": hours.series(pl.Float64, size),
    }, SCALAR_SCHEMA), {"run": run})


def _among(codes: np.ndarray, chosen: list[int], size: int) -> np.ndarray:
    """Whether each code (``0 <= code < size``) is one of ``chosen``: a table look-up (a
    fifth of ``np.isin``'s time, which also imports numpy.ma for an empty list)."""
    table = np.zeros(size, bool)
    table[chosen] = True
    chosen_codes: np.ndarray = table[codes]
    return chosen_codes


def _by_metric_then_step(codes: np.ndarray, steps: np.ndarray, size: int) -> np.ndarray:
    """The stable order by code, then step (``np.lexsort((steps, codes))``): a radix sort of
    the codes, and only the metrics whose steps are out of order sorted by step (a logger
    writes each metric's steps in order, so usually none is)."""
    if size >= 1 << 16:
        return np.lexsort((steps, codes))
    order = np.argsort(codes.astype(np.uint16), kind="stable")
    ordered = steps[order]
    counts = np.bincount(codes, minlength=size)
    bounds = np.cumsum(counts[counts > 0])[:-1]  # where each metric after the first starts
    drops = np.diff(ordered) < 0
    drops[bounds - 1] = False  # from one metric's last step to the next one's first
    backwards = np.flatnonzero(drops) + 1
    if not backwards.size:
        return order
    for segment in np.unique(np.searchsorted(bounds, backwards, side="right")).tolist():
        lo = 0 if segment == 0 else int(bounds[segment - 1])
        hi = int(bounds[segment]) if segment < bounds.size else order.size
        order[lo:hi] = order[lo:hi][np.argsort(ordered[lo:hi], kind="stable")]
    return order


class _Column:
    """A column being worked out: values, and where they are known (None: everywhere; a
    column known nowhere has no values)."""

    def __init__(self, values: np.ndarray | None, valid: np.ndarray | None) -> None:
        self.values, self.valid = values, valid

    @classmethod
    def of(cls, values: np.ndarray | None) -> _Column:
        return cls(values, None)

    def series(self, dtype: PolarsDataType, size: int) -> pl.Series:
        if self.values is None:
            return repeated(None, size, dtype)
        out: pl.Series = pl.Series(values=self.values).cast(dtype)
        if self.valid is None or self.valid.all():
            return out
        masked: pl.Series = out.set(pl.Series(values=~self.valid), None)
        return masked


def _first(*columns: _Column | None) -> _Column:
    """Each row's first known value among ``columns`` (polars' coalesce)."""
    out = _Column(None, None)
    for column in columns:
        if column is None or column.values is None:
            continue
        if out.values is None or out.valid is None:
            out = column
        else:
            take = ~out.valid if column.valid is None else ~out.valid & column.valid
            values = out.values.copy()
            values[take] = column.values[take]
            out = _Column(values, None if column.valid is None else out.valid | take)
        if out.valid is None:
            break
    return out


def _rounded(column: _Column) -> _Column:
    """A logged counter as whole numbers; a count no counter holds (NaN, infinite, negative,
    past 64 bits: 1e308 would turn into -2⁶³) unknown."""
    if column.values is None:
        return column
    with np.errstate(invalid="ignore"):  # NaN compares False: unknown too
        count = (column.values >= 0) & (column.values < 2.0 ** 63)
    valid = count if column.valid is None else column.valid & count
    return _Column(np.where(valid, np.round(column.values), 0).astype(np.int64), valid)


def _logged(codes: np.ndarray, steps: np.ndarray, values: np.ndarray, at: np.ndarray,
            size: int, counters: list[int]) -> _Column:
    """The last value the ``counters`` (codes below ``size``) logged at each step of ``at``
    (unknown where none)."""
    if not counters:
        return _Column(None, None)
    rows = np.flatnonzero(_among(codes, counters, size))
    if rows.size == 0:
        return _Column(None, None)
    logged_steps, last = steps[rows], values[rows]
    if logged_steps.size > 1 and not (np.diff(logged_steps) > 0).all():
        # the last point of each step: the first of the reversed rows
        logged_steps, first = np.unique(logged_steps[::-1], return_index=True)
        last = last[::-1][first]
    where = _positions(logged_steps, at)
    valid = where >= 0
    return _Column(np.where(valid, last[where], np.nan), valid)


def _positions(steps: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Where each of ``at`` is among ``steps`` (increasing, not empty), -1 where it is not:
    a table over the steps' span where that is short (a logger's counters at every step;
    for 10,000 points, a third of a binary search's time), a binary search otherwise.

    >>> _positions(np.array([2, 4, 6]), np.array([1, 2, 4, 5, 6, 7])).tolist()
    [-1, 0, 1, -1, 2, -1]
    >>> _positions(np.array([0, 10**6]), np.array([0, 5, 10**6, 10**7])).tolist()
    [0, -1, 1, -1]
    """
    low, high = int(steps[0]), int(steps[-1])
    if high - low > 4 * (steps.size + at.size):
        found = np.minimum(np.searchsorted(steps, at), steps.size - 1)
        return np.where(steps[found] == at, found, -1)
    table = np.full(high - low + 1, -1, np.intp)
    table[steps - low] = np.arange(steps.size)
    inside = (at >= low) & (at <= high)
    return np.where(inside, table[np.clip(at - low, 0, high - low)], -1)


def _flops(codes: np.ndarray, metrics: list[str], step: np.ndarray, values: np.ndarray,
           tokens: _Column, facts: Mapping[str, Fact[Any]]) -> _Column:
    """Cumulative training FLOPs at each point (see the module docstring); unknown when not."""
    per_token = facts.get("flops_per_token")
    if per_token is not None and per_token.value is not None:
        return (tokens if tokens.values is None else
                _Column(tokens.values * float(per_token.value), tokens.valid))
    named = [name for name in FLOP_COUNTERS if name in metrics]
    if not named:  # none logged: no pass over the points
        return _Column(None, None)
    counts = np.bincount(codes, minlength=len(metrics))
    counter = next((name for name in named if counts[metrics.index(name)]), None)
    if counter is None:
        return _Column(None, None)
    if tokens.values is not None:
        at = tokens.values.astype(float)
        if tokens.valid is not None:
            at[~tokens.valid] = np.nan
    else:
        at = step.astype(float)
    rows = (codes == metrics.index(counter)) & ~np.isnan(at)
    out = flops_at(at, at[rows], values[rows])
    return _Column(out, ~np.isnan(out))


def _optimizer_step(raw: RawLog, batch: BatchConfig, run: str, step: np.ndarray) -> np.ndarray:
    if raw.step_unit in ("optimizer", "log_call", "epoch"):  # epoch: the step is the epoch
        return step
    divisor = {"micro": batch.grad_accum, "samples": batch.global_batch,
               "tokens": batch.tokens_per_step}[raw.step_unit]
    if divisor.value is None:
        key = {"micro": "grad_accum", "samples": "global_batch",
               "tokens": "seq_len"}[raw.step_unit]
        raise MissingInfoError(
            f"run {run!r}: {raw.source} logs steps in {raw.step_unit} units and its {key} is "
            f"unknown; pass --set {run}:{key}=N to convert them to optimizer steps")
    return step // divisor.value


def schedule(batch: BatchConfig, steps: np.ndarray) -> tuple[np.ndarray | None,
                                                             np.ndarray | None]:
    """Cumulative samples and tokens at the end of each optimizer step, from the batch schedule
    (None where the schedule does not say).

    Constant batch: samples = step × global_batch, tokens = step × tokens_per_step. A ramp
    ``((0, 512), (50_000, 1024))`` sums each step's own global batch.

    >>> from runcompare.model import Fact
    >>> b = BatchConfig(global_batch=Fact(4096, "x"), tokens_per_step=Fact(4_194_304, "x"))
    >>> [s.tolist() for s in schedule(b, np.array([23_842]))]
    [[97656832], [100000595968]]
    """
    steps = steps.astype(np.int64)
    seq_len = batch.seq_len.value
    if batch.ramp:
        samples = _ramp_samples(batch.ramp, steps)
        return samples, samples * seq_len if seq_len is not None else None
    glob, per_step = batch.global_batch.value, batch.tokens_per_step.value
    return (steps * glob if glob is not None else None,
            steps * per_step if per_step is not None else None)


def _ramp_samples(ramp: tuple[tuple[int, int], ...], steps: np.ndarray) -> np.ndarray:
    """Σ of each step's global batch for steps 1..s, for a piecewise-constant ramp."""
    out = np.zeros(steps.size, np.int64)
    for i, (start, size) in enumerate(ramp):
        upper = steps if i + 1 == len(ramp) else np.minimum(steps, ramp[i + 1][0])
        out += np.maximum(upper - start, 0) * size
    return out


def _elapsed(wall: pl.Series, legs: np.ndarray) -> _Column:
    """Seconds since the run started, the pauses between resumed legs removed."""
    if wall.null_count() == wall.len():  # no wall time logged
        return _Column(None, None)
    times = wall.to_numpy()  # nulls as NaN
    valid = wall.is_not_null().to_numpy() if wall.null_count() else None
    numbers, leg_of = leg_numbers(legs)
    timed = ~np.isnan(times)  # polars' min and max pass over NaN too
    start = np.full(numbers.size, np.inf)
    end = np.full(numbers.size, -np.inf)
    has = np.zeros(numbers.size, bool)
    for i in range(numbers.size):  # a few legs: a pass each (ufunc.at is slower)
        mine = times[timed & (leg_of == i)] if numbers.size > 1 else times[timed]
        if mine.size:
            start[i], end[i], has[i] = mine.min(), mine.max(), True
    durations = np.where(has, end - start, 0.0)
    offsets = np.cumsum(durations) - durations
    out = times - np.where(has, start, np.nan)[leg_of] + offsets[leg_of]
    known = has[leg_of] if valid is None else valid & has[leg_of]
    return _Column(out, None if known.all() else known)
