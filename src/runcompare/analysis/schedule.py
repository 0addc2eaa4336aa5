"""Where each run stands in its learning-rate schedule at the budget.

A run whose learning rate has annealed by the budget reads better there than one still at a
high rate, whatever the recipes are worth: the value at a common budget then compares the
schedules' positions, not the recipes (a cosine to 2,000 steps against one to 4,000, read at
step 2,000).

A run's position at x is told two ways:
- ``decayed``: 1 − lr(x) ÷ its peak, from the logged learning rate (``train/learning_rate``);
- ``fraction``: step(x) ÷ the schedule's length in steps: ``max_steps``, else the last step of
  a run whose logged rate ends below a tenth of its peak (it finished its decay there).

The runs are at different positions (:func:`schedule_finding`) when their ``decayed`` differ by
more than :data:`GAP`, or, without a logged rate, their ``fraction`` do (and the scheduler is
not known to be constant). What to read instead (:func:`equal_fraction`): every run at the same
fraction of its own schedule, the largest that every run reaches (1: each at the end of its
schedule).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from ..model import Finding, Run, known_values
from .summary import ordered_points

__all__ = ["GAP", "Position", "describe", "equal_fraction", "position", "schedule_finding",
           "x_at_step"]

#: How far apart two runs' positions may be before the value at the budget misleads.
GAP = 0.25
#: A logged rate that ends below this share of its peak has finished its decay.
_ENDED = 0.1
_LR = "train/learning_rate"


@dataclass(frozen=True)
class Position:
    """One run at the budget: ``step`` there, ``decayed`` (None without a logged rate),
    ``fraction`` of a schedule of ``length`` steps (None when unknown), told by ``source``."""

    run: str
    step: float | None
    decayed: float | None
    fraction: float | None
    length: float | None
    source: str | None


def _between(run: Run, axis: str, other: str, value: float) -> float | None:
    """``other`` where ``axis`` is ``value``, linearly between the run's points (on the axis
    itself: ``value`` where the run has been, no points sorted)."""
    if axis == other:
        known = known_values(run.scalars.get_column(axis).cast(pl.Float64))
        if not known.size or np.isnan(known).any() or not known.min() <= value <= known.max():
            return None  # (a NaN sorts last, and no value is at or below it: as below)
        return float(value)
    frame = run.scalars.select(pl.col(axis).cast(pl.Float64).alias("a"),
                               pl.col(other).cast(pl.Float64).alias("b")).drop_nulls().sort("a")
    if frame.is_empty():
        return None
    xs, ys = frame.get_column("a").to_numpy(), frame.get_column("b").to_numpy()
    if not xs[0] <= value <= xs[-1]:
        return None
    return float(np.interp(value, xs, ys))


def _step_at(run: Run, axis: str, x: float) -> float | None:
    return _between(run, axis, "step", x)


def x_at_step(run: Run, axis: str, step: float) -> float | None:
    """Where on ``axis`` the run was at optimizer step ``step``."""
    return _between(run, "step", axis, step)


def position(run: Run, axis: str, budget: float) -> Position:
    """Where ``run`` stands in its schedule at ``budget`` on ``axis`` (see the module)."""
    step = _step_at(run, axis, budget)
    decayed = length = source = None
    steps, lr = _rates(run)
    if lr.size >= 2 and step is not None:
        peak = float(lr.max())
        if peak > 0:
            decayed = 1 - float(np.interp(step, steps, lr)) / peak
            if lr[-1] < _ENDED * peak:
                length, source = float(steps[-1]), "the logged learning rate ends its decay"
    max_steps = run.facts.get("max_steps")
    if max_steps is not None and max_steps.value and max_steps.value > 0:
        length, source = float(max_steps.value), f"max_steps ({max_steps.source})"
    fraction = step / length if step is not None and length else None
    return Position(run.name, step, decayed, fraction, length, source)


def _rates(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """The run's finite logged learning rates and their steps, in step order
    (:func:`~.summary.ordered_points`: sorted only when the points are not; a query a run
    took 0.4 ms)."""
    points = ordered_points(run, _LR, "step")
    lr = points.get_column("value").to_numpy()
    finite = np.isfinite(lr)
    return points.get_column("step").cast(pl.Float64).to_numpy()[finite], lr[finite]


def _constant(run: Run) -> bool:
    kind = run.facts.get("lr_scheduler_type")
    return kind is not None and str(kind.value).startswith("constant")


def schedule_finding(runs: Sequence[Run], positions: Sequence[Position]) -> Finding | None:
    """A ``schedule-position`` warning when the runs stand at different points of their
    schedules at the budget (see the module), else None."""
    decayed = [p.decayed for p in positions]
    if all(d is not None for d in decayed):
        spread = max(decayed) - min(decayed)  # type: ignore[type-var,operator]
        told = _told(positions, "decayed", "decayed")
    else:
        fractions = [p.fraction for p in positions]
        if any(f is None for f in fractions) or any(_constant(run) for run in runs):
            return None
        spread = max(fractions) - min(fractions)  # type: ignore[type-var,operator]
        told = _told(positions, "fraction", "through")
    if spread <= GAP:
        return None
    return Finding("warning", "schedule-position",
                   f"at the budget the runs stand at different points of their learning-rate "
                   f"schedules ({told}), so the value there favours the run that "
                   "has annealed more; compare them at the same fraction of each schedule")


#: Runs a finding names one by one; past it, the range and how many runs stand where.
_NAMED = 4


def _told(positions: Sequence[Position], field: str, word: str) -> str:
    """Each run's position, or past :data:`_NAMED` runs the range and the count at its ends.

    >>> p = [Position(f"r{i}", 1.0, d, None, None, None) for i, d in enumerate([.44, .99, .44])]
    >>> _told(p[:2], "decayed", "decayed"), _told(p * 2, "decayed", "decayed")
    ('r0 44% decayed, r1 99% decayed', 'from 44% to 99% decayed across 6 runs (4 at 44%, 2 at 99%)')
    """
    values = [getattr(p, field) for p in positions]
    if len(positions) <= _NAMED:
        return ", ".join(f"{p.run} {v:.0%} {word}" for p, v in zip(positions, values))
    low, high = min(values), max(values)
    at_low = sum(f"{v:.0%}" == f"{low:.0%}" for v in values)
    at_high = sum(f"{v:.0%}" == f"{high:.0%}" for v in values)
    return (f"from {low:.0%} to {high:.0%} {word} across {len(values)} runs ({at_low} at "
            f"{low:.0%}, {at_high} at {high:.0%})")


def equal_fraction(positions: Sequence[Position], runs: Sequence[Run]) -> tuple[
        float, dict[str, float]] | None:
    """The largest fraction of its schedule that every run reaches, and the step at which
    each reaches it; None unless every run's schedule length is known."""
    if any(p.length is None for p in positions):
        return None
    reached = []
    for run, p in zip(runs, positions):
        last = run.scalars.get_column("step").max()
        reached.append(min(float(last) / p.length, 1.0))  # type: ignore[arg-type,operator]
    share = min(reached)
    return share, {p.run: share * p.length for p in positions}  # type: ignore[operator]


def describe(share: float) -> str:
    """The fraction in words.

    >>> describe(1.0), describe(0.754)
    ('at the end of each schedule', 'at 75% of each schedule')
    """
    return "at the end of each schedule" if share >= 0.995 else f"at {share:.0%} of each schedule"
