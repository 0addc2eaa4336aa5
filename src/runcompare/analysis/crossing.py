"""Where a curve crosses a target, and what any other column reads there.

A crossing is found between the two points around it and interpolated linearly, never
extrapolated: a curve that is already at or past the target at its first point crosses there;
one that never reaches it has no crossing. Non-finite values are left out before searching.
The position is fractional (``2.25`` = a quarter of the way from point 2 to point 3), so the
same crossing can be read off the x axis, the wall clock, FLOPs or device-hours alike.
"""

from __future__ import annotations

import numpy as np

__all__ = ["at_position", "crossing", "value_at"]


def crossing(values: np.ndarray, goal: float | None, *, higher: bool) -> float | None:
    """Fractional index at which ``values`` first reach ``goal`` (≥ when ``higher``, else ≤).

    >>> round(crossing(np.array([4.09, 2.944, 2.357, 2.187]), 2.204, higher=False), 4)
    2.9
    >>> crossing(np.array([3.0, 2.0]), 3.5, higher=False), crossing(np.array([3.0]), 1.0,
    ...                                                               higher=False)
    (0.0, None)
    """
    if goal is None or not np.isfinite(goal):
        return None
    with np.errstate(invalid="ignore"):
        reached = values >= goal if higher else values <= goal
    hits = np.flatnonzero(reached & np.isfinite(values))
    if not hits.size:
        return None
    i = int(hits[0])
    if i == 0:
        return 0.0
    before, after = float(values[i - 1]), float(values[i])
    if not np.isfinite(before) or after == before:
        return float(i)
    return i - 1 + (goal - before) / (after - before)


def at_position(column: np.ndarray, position: float | None) -> float | None:
    """``column`` read at a fractional index, linearly between its two neighbours; None where
    either neighbour is not finite.

    >>> at_position(np.array([76_800., 102_400.]), 0.9014), at_position(np.array([1., 2.]), None)
    (99875.84, None)
    """
    if position is None:
        return None
    low = int(np.floor(position))
    high = min(low + 1, column.size - 1)
    share = position - low
    a, b = float(column[low]), float(column[high])
    if not (np.isfinite(a) and (share == 0 or np.isfinite(b))):
        return None
    return a if share == 0 else a + share * (b - a)


def value_at(xs: np.ndarray, values: np.ndarray, x: float | None) -> float | None:
    """``values`` at ``x`` by linear interpolation between finite points; None outside them.

    >>> value_at(np.array([0., 10.]), np.array([1., 3.]), 2.5), value_at(np.array([0.]),
    ...                                                                   np.array([1.]), 1.0)
    (1.5, None)
    """
    finite = np.isfinite(values) & np.isfinite(xs)
    if x is None or not finite.any():
        return None
    xs, values = xs[finite], values[finite]
    if not xs[0] <= x <= xs[-1]:
        return None
    return float(np.interp(x, xs, values))
