"""W&B history on its step: the step metric a run declared (or ``_step``), carried to every
point of its row, with the findings about that choice. Shared by the run-folder and export
formats.
"""

from __future__ import annotations

import fnmatch
import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ....errors import InputError
from ....model import RAW_SCHEMA, Finding
from ._leg import Leg

__all__ = ["LOG_STEP", "history_scalars"]

#: W&B's own log-call counter, the step of a history without a declared step metric.
LOG_STEP = "_step"


def _definitions(legs: list[Leg]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Declared step metrics: exact names -> step metric, and (glob, step metric) pairs."""
    names: dict[str, str] = {}
    globs: list[tuple[str, str]] = []
    for metric in (m for leg in legs for m in leg.metrics):
        step = metric.get("step_metric")
        if step and metric.get("name"):
            names[metric["name"]] = step
        elif step and metric.get("glob_name"):
            globs.append((metric["glob_name"], step))
    return names, globs


def _declared_step(legs: list[Leg],
                   counts: Mapping[str, int]) -> tuple[str | None, dict[str, str | None]]:
    """The step metric declared for the most points (None: most points have none, so they are
    on ``_step``), and each metric's own declared step metric."""
    names, globs = _definitions(legs)
    per_metric: dict[str, str | None] = {}
    for key in counts:
        step = names.get(key)
        if step is None:
            step = next((s for g, s in reversed(globs) if fnmatch.fnmatchcase(key, g)), None)
        per_metric[key] = step
    votes: Counter[str | None] = Counter()
    for key, step in per_metric.items():
        if step != key:
            votes[step] += counts[key]
    chosen = votes.most_common(1)[0][0] if votes else None
    return chosen, per_metric


def _items(legs: list[Leg]) -> pl.DataFrame:
    """History items of all legs: leg, row, key, value (null when not a number)."""
    frames = [leg.history.with_columns(leg=pl.lit(i, pl.Int32)) for i, leg in enumerate(legs)]
    items = pl.concat(frames)
    # a JSON object is never a number: look for them only when some value is not one
    nested = items.filter(pl.col("value").is_null() & pl.col("value_json").str.starts_with("{")
                          & ~pl.col("key").str.starts_with("_")) \
        if items.get_column("value").null_count() else items.clear()
    if not nested.is_empty():  # the legacy writer kept nested dicts as one JSON object
        plain = items.filter(~pl.col("value_json").str.starts_with("{")).drop("value_json")
        return pl.concat([plain, _flatten(nested).select(plain.columns)]).sort(
            "leg", "row", maintain_order=True)
    return items.drop("value_json")


def _flatten(nested: pl.DataFrame) -> pl.DataFrame:
    """Numeric leaves of JSON objects as ``key/sub/leaf`` items (media objects skipped)."""

    rows: list[tuple[Any, ...]] = []

    def walk(leg: int, row: int, key: str, value: Any) -> None:
        if isinstance(value, dict) and "_type" not in value:
            for sub, inner in value.items():
                walk(leg, row, f"{key}/{sub}", inner)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            rows.append((row, key, leg, float(value)))

    for row, key, text, leg in nested.select("row", "key", "value_json", "leg").iter_rows():
        try:
            walk(leg, row, key, json.loads(text))
        except ValueError:
            continue
    return pl.DataFrame(rows, schema={"row": pl.Int64, "key": pl.String, "leg": pl.Int32,
                                      "value": pl.Float64}, orient="row")


def history_scalars(legs: list[Leg], override: str | None,
                    path: Path) -> tuple[pl.DataFrame, str, list[Finding], str]:
    """The points of the legs' history in RAW_SCHEMA, the step unit, findings about the step
    and the step key (``override``: the user's step metric; else the one declared)."""
    items = _items(legs)
    counts = {key: count for key, count in items.filter(pl.col("value").is_not_null())
              .group_by("key").len().iter_rows() if not key.startswith("_")}
    findings: list[Finding] = []
    declared, per_metric = _declared_step(legs, counts)
    step = override or declared
    if step is not None and step != LOG_STEP:
        problem = _step_problem(items, step)
        if problem and override:
            raise InputError(f"{path}: step_metric {step!r} {problem}; choose one of "
                             f"{', '.join(_candidates(counts) or sorted(counts)[:10])}")
        if problem:
            findings.append(Finding("warning", "step-metric-unusable",
                                    f"{path}: the declared step metric {step!r} {problem}; "
                                    "using W&B's _step instead"))
            step = None
    if step is None or step == LOG_STEP:
        step = LOG_STEP
        if override != LOG_STEP:
            findings.append(_log_call_finding(path, counts))
    others = sorted(k for k, s in per_metric.items() if (s or LOG_STEP) != step and k != step)
    if others:
        findings.append(Finding("info", "step-metric", f"{path}: {', '.join(others[:5])} "
                                f"declared another step metric; every metric is put on {step!r}"))
    frame, dropped = _points(items, legs, step)
    if dropped:
        findings.append(Finding("info", "before-first-step",
                                f"{path}: {dropped} points logged before the first {step!r} "
                                "value have no step and were dropped"))
    return frame, "log_call" if step == LOG_STEP else "optimizer", findings, step


def _step_problem(items: pl.DataFrame, step: str) -> str | None:
    """Why ``step`` cannot be the step column, or None when it can."""
    values = items.filter(pl.col("key") == step).get_column("value").drop_nulls()
    if values.is_empty():
        return "is not in the history"
    finite = values.filter(values.is_finite())
    if finite.len() < values.len() or (finite != finite.round()).any():
        return "has values that are not whole numbers"
    return None


def _candidates(counts: Mapping[str, int]) -> list[str]:
    return sorted(k for k in counts if "step" in k.lower() or "iter" in k.lower())[:5]


def _log_call_finding(path: Path, counts: Mapping[str, int]) -> Finding:
    hint = _candidates(counts)
    keys = f" (candidates: {', '.join(hint)})" if hint else ""
    return Finding("warning", "step-is-log-call",
                   f"{path}: the W&B run declares no step metric, so its step is _step, which "
                   "counts wandb.log() calls, not optimizer steps (logging train and eval "
                   "metrics in separate calls advances it twice); if a logged key counts "
                   f"optimizer steps{keys}, pass --set step_metric=KEY, or declare it in the "
                   "script: wandb.define_metric('*', step_metric=KEY)")


def _points(items: pl.DataFrame, legs: list[Leg], step: str) -> tuple[pl.DataFrame, int]:
    """One row per metric value with its row's step and wall time; a row without the step
    key takes the leg's last step value before it (W&B's step_sync), and points logged
    before a leg's first step value are dropped and counted.

    ``items`` are in (leg, row) order, so every history row of every leg gets a slot in small
    numpy tables (one entry per record): the step, ``_timestamp`` and ``_runtime`` values are
    put in them, the step is carried forward to the slots without one, and each point reads
    its row's slot, with no join. A record holding one of those keys twice takes
    :func:`_points_joined`."""
    key, value = pl.col("key"), pl.col("value")
    offset = np.zeros(len(legs) + 1, np.int64)
    if not items.is_empty():  # each leg's items are together: the largest row of each
        leg, row = items.get_column("leg").to_numpy(), items.get_column("row").to_numpy()
        first = np.flatnonzero(np.r_[True, leg[1:] != leg[:-1]])
        sizes = np.zeros(len(legs), np.int64)
        sizes[leg[first]] = np.maximum.reduceat(row, first) + 1
        offset[1:] = np.cumsum(sizes)
    slots = int(offset[-1])

    def slot_of(frame: pl.DataFrame) -> np.ndarray:
        row = frame.get_column("row").to_numpy()
        return row + offset[frame.get_column("leg").to_numpy()] if len(legs) > 1 else row

    tables: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    internal = items.filter(key.is_in([step, "_timestamp", "_runtime"]) & value.is_not_null())
    for name in (step, "_timestamp", "_runtime"):
        found = internal.filter(key == name)
        at = slot_of(found)
        if len(at) and np.bincount(at, minlength=slots).max() > 1:
            return _points_joined(items, legs, step)
        has = np.zeros(slots, bool)
        has[at] = True
        table = np.zeros(slots, np.float64)
        table[at] = found.get_column("value").to_numpy()
        tables[name] = (table, has)
    # the step of each slot: that of the last slot at or before it with a step value
    source = np.maximum.accumulate(np.where(tables[step][1], np.arange(slots), -1)) \
        if slots else np.zeros(0, np.int64)
    points = items.filter(~key.str.starts_with("_") & (key != step) & value.is_not_null())
    at = slot_of(points)
    found = source[at]
    has_step = found >= 0
    if len(legs) > 1:  # only a step of the point's own leg counts
        slot_leg = np.repeat(np.arange(len(legs)), np.diff(offset))
        has_step &= slot_leg[np.maximum(found, 0)] == points.get_column("leg").to_numpy()
    dropped = int(len(found) - np.count_nonzero(has_step))
    if dropped:
        points, at, found = points.filter(pl.Series(has_step)), at[has_step], found[has_step]
    stamp, has_time = tables["_timestamp"][0][at], tables["_timestamp"][1][at]
    starts = np.array([np.nan if leg.start_time is None else leg.start_time for leg in legs])
    known = np.array([leg.start_time is not None for leg in legs], bool)
    point_leg = points.get_column("leg").to_numpy()
    runtime, has_runtime = tables["_runtime"][0][at], tables["_runtime"][1][at]
    wall = np.where(has_time, stamp, starts[point_leg] + runtime)
    wall_time = pl.Series("wall_time", wall)
    missing = ~has_time & ~(has_runtime & known[point_leg])
    if missing.any():
        wall_time = wall_time.set(pl.Series(missing), None)
    frame = points.select(
        metric=key, value=value, step=pl.Series(tables[step][0][found]).round().cast(pl.Int64),
        wall_time=wall_time, leg=pl.col("leg"))
    return frame.cast(RAW_SCHEMA), dropped  # type: ignore[arg-type]


def _points_joined(items: pl.DataFrame, legs: list[Leg], step: str) -> tuple[pl.DataFrame, int]:
    """:func:`_points` with polars joins: also right when a record holds the step,
    ``_timestamp`` or ``_runtime`` key more than once (and the reference for :func:`_points`)."""
    key, value = pl.col("key"), pl.col("value")
    starts = {i: leg.start_time for i, leg in enumerate(legs)}
    # one sorted integer per history row of every leg, for cheap joins
    items = items.with_columns(row=pl.col("leg").cast(pl.Int64) * (1 << 40) + pl.col("row"))
    internal = items.filter(key.is_in([step, "_timestamp", "_runtime"]) & value.is_not_null())

    def column(name: str, alias: str) -> pl.DataFrame:
        return internal.filter(key == name).select("row", value.alias(alias))

    steps = internal.filter(key == step).select("row", step_leg=pl.col("leg"), step=value)
    points = (items.filter(~key.str.starts_with("_") & (key != step) & value.is_not_null())
              .join_asof(steps, on="row", strategy="backward", check_sortedness=False)
              .join(column("_timestamp", "wall_time"), on="row", how="left",
                    maintain_order="left")
              .join(column("_runtime", "runtime"), on="row", how="left", maintain_order="left"))
    has_step = pl.col("step").is_not_null() & (pl.col("step_leg") == pl.col("leg"))
    dropped = points.height - int(points.select(has_step.sum()).item())
    start = pl.col("leg").replace_strict(starts, default=None, return_dtype=pl.Float64)
    frame = points.filter(has_step).select(
        metric=key, value=value, step=pl.col("step").round().cast(pl.Int64),
        wall_time=pl.coalesce("wall_time", start + pl.col("runtime")), leg=pl.col("leg"))
    return frame.cast(RAW_SCHEMA), dropped  # type: ignore[arg-type]
