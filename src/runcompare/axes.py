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
from typing import Any

import numpy as np
import polars as pl

from .display import fmt
from .errors import MissingInfoError
from .model import AXIS_METRICS, KEPT_COUNTERS, SCALAR_SCHEMA, BatchConfig, Fact, RawLog

__all__ = ["FLOP_COUNTERS", "axis_sources", "flops_at", "normalize", "schedule"]

#: Logged metrics that count cumulative training FLOPs, the preferred first.
FLOP_COUNTERS = ("train/total_flos", "train/total_flops", "train/cumulative_flops")


def axis_sources(raw: RawLog, batch: BatchConfig, *, facts: Mapping[str, Fact[Any]] | None = None,
                 wall_times: str | None = None) -> dict[str, str]:
    """Where each derived axis of a run comes from: samples and tokens (a logged counter or
    the schedule), elapsed (``wall_times``: who logged them), FLOPs and device-hours."""
    out = _count_sources(raw, batch)
    if wall_times is not None:
        out["elapsed"] = f"{wall_times}; seconds since the first logged point"
        world = batch.world_size
        if world.value is not None:
            out["device_hours"] = (f"elapsed × world size {world.value} ({world.source}) "
                                   "÷ 3600")
    flops = _flops_source(raw, facts or {}, "tokens" in out)
    if flops is not None:
        out["flops"] = flops
    return out


def _count_sources(raw: RawLog, batch: BatchConfig) -> dict[str, str]:
    logged = set(raw.scalars.get_column("metric").unique().to_list())
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


def _flops_source(raw: RawLog, facts: Mapping[str, Fact[Any]], tokens: bool) -> str | None:
    per_token = facts.get("flops_per_token")
    if per_token is not None and per_token.value is not None:
        return (f"flops_per_token {fmt(per_token.value)} ({per_token.source}) × tokens"
                if tokens else None)
    counter = _counter_name(raw.scalars)
    if counter is None:
        return None
    logged = raw.aliases.get(counter, counter)
    return (f"logged counter {logged} ({raw.source}), spread linearly over the tokens "
            "before each logged value" if tokens else
            f"logged counter {logged} ({raw.source}), spread linearly over the steps")


def _counter_name(scalars: pl.DataFrame) -> str | None:
    present = set(scalars.filter(pl.col("metric").is_in(FLOP_COUNTERS))
                  .get_column("metric").unique().to_list())
    return next((name for name in FLOP_COUNTERS if name in present), None)


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
    out = np.interp(at, xs, counts)
    out[~(at <= xs[-1])] = np.nan  # past the last count, or no position at all
    return out


def normalize(raw: RawLog, batch: BatchConfig, *, run: str,
              facts: Mapping[str, Fact[Any]] | None = None) -> pl.DataFrame:
    """The tidy frame of :data:`SCALAR_SCHEMA` for one run: every raw point, all axes."""
    frame = raw.scalars.with_columns(step=_optimizer_step(raw, batch, run))
    counters = frame.filter(pl.col("metric").is_in(list(AXIS_METRICS)))
    points = frame.filter(~pl.col("metric").is_in(list(AXIS_METRICS.keys() - KEPT_COUNTERS)))
    per_step = (counters.with_columns(pl.col("metric").replace_strict(AXIS_METRICS))
                .group_by("step", "metric").agg(pl.col("value").last())
                .pivot(on="metric", index="step", values="value"))
    for column in AXIS_METRICS.values():
        if column not in per_step.columns:
            per_step = per_step.with_columns(pl.lit(None, pl.Float64).alias(column))
    points = points.join(per_step, on="step", how="left")
    accum = batch.grad_accum.value
    samples_at, tokens_at = schedule(batch, points.get_column("step"))
    if raw.step_unit == "epoch":  # the step counts epochs: no schedule puts it on samples
        accum, samples_at, tokens_at = None, samples_at.clear(points.height), \
            tokens_at.clear(points.height)
        points = points.with_columns(epoch=pl.coalesce("epoch", pl.col("step").cast(pl.Float64)))
    points = points.with_columns(
        micro_step=None if accum is None else pl.col("step") * accum,
        samples=pl.coalesce(pl.col("samples").round().cast(pl.Int64), samples_at),
        tokens=pl.coalesce(pl.col("tokens").round().cast(pl.Int64),
                           _tokens_from_samples(batch), tokens_at),
        elapsed=_elapsed(points),
        run=pl.lit(run),
    )
    world = batch.world_size.value
    points = points.with_columns(
        flops=_flops(points, facts or {}),
        device_hours=None if world is None else pl.col("elapsed") * world / 3600,
    )
    # by metric (its rank among the few names: no string comparisons per row), then step; a
    # stable sort keeps the source's time order among points logged at the same step
    order = {name: i for i, name in enumerate(sorted(points.get_column("metric").unique()))}
    key = pl.col("metric").replace_strict(order, return_dtype=pl.UInt32)
    return (points.select([pl.col(c).cast(t) for c, t in SCALAR_SCHEMA.items()])
            .sort(key, "step", maintain_order=True))


def _flops(points: pl.DataFrame, facts: Mapping[str, Fact[Any]]) -> pl.Series:
    """Cumulative training FLOPs at each point (see the module docstring); null when unknown."""
    tokens = points.get_column("tokens").cast(pl.Float64)
    per_token = facts.get("flops_per_token")
    if per_token is not None and per_token.value is not None:
        return (tokens * float(per_token.value)).alias("flops")
    counter = _counter_name(points)
    if counter is None:
        return pl.repeat(None, points.height, dtype=pl.Float64, eager=True).alias("flops")
    ref = "tokens" if tokens.null_count() < points.height else "step"
    logged = points.filter(pl.col("metric") == counter, pl.col(ref).is_not_null())
    at = points.get_column(ref).cast(pl.Float64).to_numpy()
    values = flops_at(at, logged.get_column(ref).cast(pl.Float64).to_numpy(),
                      logged.get_column("value").to_numpy())
    return pl.Series("flops", values).fill_nan(None)


def _tokens_from_samples(batch: BatchConfig) -> pl.Expr:
    """Tokens from a logged samples counter × sequence length: exact through a batch ramp."""
    seq_len = batch.seq_len.value
    if seq_len is None:
        return pl.lit(None, pl.Int64)
    return (pl.col("samples").round() * seq_len).cast(pl.Int64)


def _optimizer_step(raw: RawLog, batch: BatchConfig, run: str) -> pl.Expr:
    step = pl.col("step")
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


def schedule(batch: BatchConfig, steps: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Cumulative samples and tokens at the end of each optimizer step, from the batch schedule.

    Constant batch: samples = step × global_batch, tokens = step × tokens_per_step. A ramp
    ``((0, 512), (50_000, 1024))`` sums each step's own global batch.

    >>> from runcompare.model import Fact
    >>> b = BatchConfig(global_batch=Fact(4096, "x"), tokens_per_step=Fact(4_194_304, "x"))
    >>> [s.to_list() for s in schedule(b, pl.Series([23_842]))]
    [[97656832], [100000595968]]
    """
    steps = steps.cast(pl.Int64)
    unknown = pl.repeat(None, len(steps), dtype=pl.Int64, eager=True)
    seq_len = batch.seq_len.value
    if batch.ramp:
        samples = _ramp_samples(batch.ramp, steps)
        tokens = samples * seq_len if seq_len is not None else unknown
        return samples.alias("samples"), tokens.cast(pl.Int64).alias("tokens")
    glob, per_step = batch.global_batch.value, batch.tokens_per_step.value
    samples = steps * glob if glob is not None else unknown
    tokens = steps * per_step if per_step is not None else unknown
    return samples.alias("samples"), tokens.alias("tokens")


def _ramp_samples(ramp: tuple[tuple[int, int], ...], steps: pl.Series) -> pl.Series:
    """Σ of each step's global batch for steps 1..s, for a piecewise-constant ramp."""
    starts = [start for start, _ in ramp]
    sizes = [size for _, size in ramp]
    out = pl.repeat(0, len(steps), dtype=pl.Int64, eager=True)
    for i, (start, size) in enumerate(zip(starts, sizes)):
        end = starts[i + 1] if i + 1 < len(starts) else None
        upper = steps if end is None else steps.clip(upper_bound=end)
        out = out + (upper - start).clip(lower_bound=0) * size
    return out


def _elapsed(points: pl.DataFrame) -> pl.Expr:
    """Seconds since the run started, the pauses between resumed legs removed."""
    if points.get_column("wall_time").null_count() == points.height:  # no wall time logged
        return pl.lit(None, pl.Float64)
    legs = (points.group_by("leg").agg(start=pl.col("wall_time").min(),
                                       end=pl.col("wall_time").max()).sort("leg"))
    durations = (legs.get_column("end") - legs.get_column("start")).fill_null(0.0)
    offsets = durations.cum_sum() - durations
    start_of = dict(zip(legs.get_column("leg").to_list(), legs.get_column("start").to_list()))
    offset_of = dict(zip(legs.get_column("leg").to_list(), offsets.to_list()))
    return (pl.col("wall_time")
            - pl.col("leg").replace_strict(start_of, default=None, return_dtype=pl.Float64)
            + pl.col("leg").replace_strict(offset_of, default=None, return_dtype=pl.Float64))
