"""The local linear fit that training metrics are read off, and its noise.

- :func:`local_fit`: at each place, the least-squares line through the finite points within
  ±h of it (a box window, widened to the two points around a place between them), read there.
  A straight trend comes out as it is, with no lag, inside a run and at its ends alike. A
  causal EMA trails a falling loss by about its half-life ÷ ln 2, which moved crossings late
  and read a loss that was still falling as higher than it was at the budget. The window sums
  come from cumulative sums, so a fit of n points at m places costs O((n + m) log n).
- :func:`fit_noise`: the standard deviation of the fit at one place. The raw points' scatter
  σ and their lag-1 autocorrelation ρ come from the residuals around a quadratic through the
  last stretch before the budget (the last 20% of it, at least 10 points; the residuals'
  degrees of freedom counted in correlated points). The fit's variance
  is then σ²·Σᵢⱼ lᵢlⱼρ^|i−j| over its weights l (an AR(1) noise). Independent points (ρ = 0)
  give σ²·Σl²; points that move together count as fewer points, never as more.
- :func:`metric_curve`, :func:`metric_value`: what a comparison reads a metric's crossings and
  its value at the budget off: eval metrics as logged (interpolated between evals), per-step
  training metrics on the local fit.
- :func:`fit_width`: the window of a comparison's smoothing: an x-aware EMA's half-life, or
  for TensorBoard's EMA by point the half-life in points times the median spacing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from ..model import Run
from .kinds import is_eval
from .smooth import Smoothing

__all__ = ["FitNoise", "fit_noise", "fit_width", "local_fit", "metric_curve", "metric_value",
           "run_curve"]

#: The last stretch of the budget whose raw points measure the scatter, and the fewest points
#: it holds (taken further back when the stretch has fewer).
_STRETCH, _POINTS = 0.2, 10
#: The largest lag-1 autocorrelation taken (a random walk would make the variance unbounded).
_RHO_MAX = 0.99


@dataclass(frozen=True)
class FitNoise:
    """The fit's standard deviation ``sigma`` at one place; ``point`` the raw points' own,
    ``rho`` their lag-1 autocorrelation, ``points`` how many measured them and ``effective``
    how many independent points the fit is worth (Σl² ÷ lᵀRl of them, at most the window's)."""

    sigma: float
    point: float
    rho: float
    points: int
    effective: float


def fit_width(smoothing: Smoothing | None, runs: Sequence[np.ndarray]) -> float:
    """The half-width of the fit's window for ``smoothing``, for runs with points at each of
    ``runs`` (0: each raw point alone); TensorBoard's EMA by point counts points at the median
    of the runs' median spacings.

    >>> fit_width(Smoothing("x", 50.0), [np.arange(10.)]), fit_width(None, [np.arange(3.)])
    (50.0, 0.0)
    >>> round(fit_width(Smoothing("tb", 0.5), [np.arange(0., 100., 10.)]), 6)  # 1 point apart
    10.0
    """
    if smoothing is None or smoothing.value <= 0:
        return 0.0
    if smoothing.kind != "tb":
        return float(smoothing.value)
    spacings = []
    for xs in runs:
        finite = np.sort(xs[np.isfinite(xs)])
        if finite.size > 1:
            spacings.append(float(np.median(np.diff(finite))))
    spacing = float(np.median(spacings)) if spacings else 0.0
    return math.log(0.5) / math.log(smoothing.value) * spacing


def _window(u: np.ndarray, a: np.ndarray, w: float) -> tuple[np.ndarray, np.ndarray]:
    """Index ranges [lo, hi) of the points within ±w of each place, widened to hold the points
    on either side of a place between them."""
    lo = np.searchsorted(u, a - w, side="left")
    hi = np.searchsorted(u, a + w, side="right")
    if a.size == u.size and a.base is u or a is u:
        return lo, hi  # the places are the points: each window holds its own
    left = np.searchsorted(u, a, side="right") - 1
    right = np.searchsorted(u, a, side="left")
    lo = np.where(left >= 0, np.minimum(lo, np.maximum(left, 0)), lo)
    hi = np.where(right < u.size, np.maximum(hi, right + 1), hi)
    return lo, hi


def _finite(xs: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = np.isfinite(xs) & np.isfinite(values)
    if keep.all():
        return xs.astype(float, copy=False), values.astype(float, copy=False)
    return xs[keep].astype(float), values[keep].astype(float)


def _between(x: np.ndarray, y: np.ndarray, low: float,
             high: float) -> tuple[np.ndarray, np.ndarray]:
    """The points from the last one before ``low`` to the first one after ``high``: all that a
    fit at places between them reads (a fit at one place need not sum a whole run)."""
    first = max(int(np.searchsorted(x, low, side="left")) - 1, 0)
    last = min(int(np.searchsorted(x, high, side="right")) + 1, x.size)
    return x[first:last], y[first:last]


def _scaled(x: np.ndarray, y: np.ndarray, at: np.ndarray,
            h: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The (finite) points and the places on [0, 1] over the points' range; h likewise."""
    origin = x[0] if x.size else 0.0
    scale = max(float(x[-1] - origin) if x.size else 0.0, h, 1e-300)
    return (x - origin) / scale, y, (np.asarray(at, float) - origin) / scale, h / scale


def local_fit(xs: np.ndarray, values: np.ndarray, at: np.ndarray, h: float) -> np.ndarray:
    """The local linear fit of ``values`` (sorted by ``xs``) at each of ``at``, window ±``h``;
    NaN outside the points' range.

    >>> x = np.arange(10.); v = 2 - 0.1 * x  # a straight trend, read with no lag at its ends
    >>> [round(float(f), 4) for f in local_fit(x, v, np.array([0., 4.5, 9.]), 2.0)]
    [2.0, 1.55, 1.1]
    >>> local_fit(x, v, np.array([9.5]), 2.0)
    array([nan])
    """
    x, y = _finite(xs, values)
    at = np.asarray(at, float)
    if at.size and at.size * 8 < x.size:  # a few places: only the points around them
        x, y = _between(x, y, float(at.min()) - h, float(at.max()) + h)
    u, y, a, w = _scaled(x, y, at, h)
    out = np.full(a.shape, np.nan)
    if not u.size:
        return out
    points = at is xs or (at.size == x.size and bool(np.array_equal(at, x)))
    a = u if points else a
    inside = (a >= u[0]) & (a <= u[-1])
    lo, hi = _window(u, u if points else a[inside], w)
    centre = y.mean()
    dy = y - centre
    sums = np.zeros((4, u.size + 1))
    np.cumsum(np.stack([u, u * u, dy, u * dy]), axis=1, out=sums[:, 1:])
    s1, s2, t0, t1 = (row.take(hi) - row.take(lo) for row in sums)
    n = (hi - lo).astype(float)
    det = n * s2 - s1 * s1
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(det > 1e-9 * n * s2, (n * t1 - s1 * t0) / det, 0.0)
        out[inside] = centre + (t0 + slope * (n * a[inside] - s1)) / n
    return out


def _weights(u: np.ndarray, place: float, w: float) -> tuple[int, np.ndarray]:
    """The first index and the weights of the points whose sum is the fit at ``place``."""
    lo, hi = (int(i[0]) for i in _window(u, np.array([place]), w))
    window = u[lo:hi]
    mean = window.mean()
    spread = float(np.sum((window - mean) ** 2))
    if spread <= 1e-9 * float(np.sum(window ** 2)) or window.size < 2:
        return lo, np.full(window.size, 1.0 / window.size)
    return lo, 1.0 / window.size + (window - mean) * (place - mean) / spread


def _ar1_form(weights: np.ndarray, rho: float) -> float:
    """Σᵢⱼ lᵢlⱼρ^|i−j|, the variance of Σlᵢeᵢ for unit AR(1) noise eᵢ: Σl² + 2Σⱼ lⱼcⱼ with
    cⱼ = Σᵢ₍ᵢ₌ⱼ₎ ρ^(j−i)·lᵢ, summed in blocks short enough that ρ^(−i) stays finite.

    >>> _ar1_form(np.array([0.5, 0.5]), 0.0), _ar1_form(np.array([0.5, 0.5]), 0.5)
    (0.5, 0.75)
    >>> w = np.random.default_rng(1).random(3000); r = 0.9
    >>> lag = np.abs(np.subtract.outer(np.arange(3000), np.arange(3000)))
    >>> bool(np.isclose(_ar1_form(w, r), w @ (r ** lag) @ w))
    True
    """
    total = float(np.sum(weights ** 2))
    if rho <= 0 or weights.size < 2:
        return total
    lags = math.ceil(math.log(1e-13) / math.log(rho))  # past these ρ^k counts for nothing
    if lags <= 64:
        return total + 2 * sum(rho ** k * float(weights[:-k] @ weights[k:])
                               for k in range(1, min(lags, weights.size - 1) + 1))
    block = max(int(230 / -math.log(rho)), 1)
    carried = 0.0  # c at the block's first index
    for start in range(0, weights.size, block):
        w = weights[start:start + block]
        j = np.arange(w.size, dtype=float)
        down = rho ** j
        partial = np.cumsum(w / down)
        before = np.concatenate([[0.0], partial[:-1]])
        total += 2 * float(np.sum(w * down * (carried + before)))
        carried = float(rho ** w.size * (carried + partial[-1]))
    return total


def _scatter(u: np.ndarray, y: np.ndarray, budget: float,
             start: float) -> tuple[float, float, int] | None:
    """σ and ρ of the raw points around a quadratic (a line under 6 points) through the last
    stretch, from ``start`` to ``budget`` (scaled; at least :data:`_POINTS` points), and how
    many points that is."""
    before = u <= budget + 1e-12
    u, y = u[before], y[before]
    recent = int(np.count_nonzero(u >= start))
    count = min(max(recent, _POINTS), u.size)
    if count < 4:
        return None
    u, y = u[-count:], y[-count:]
    if np.ptp(u) == 0:
        return None
    degree = 2 if count >= 6 else 1
    residual = y - np.polyval(np.polyfit(u, y, degree), u)
    energy = float(np.sum(residual ** 2))
    rho = float(np.sum(residual[1:] * residual[:-1])) / energy if energy > 0 else 0.0
    # the lag-1 estimate is biased low by about (1 + 4ρ)/n (and more after a trend is taken
    # out): add that back, so that correlated points are not counted as independent ones
    rho = min(max(rho + (1 + 4 * max(rho, 0.0)) / count, 0.0), _RHO_MAX)
    # the trend took out degree + 1 parameters' worth of correlated points: each is worth τ
    # points of residual, τ = (1 + ρ)/(1 − ρ) (the integrated autocorrelation time)
    tau = (1 + rho) / (1 - rho)
    sigma = math.sqrt(energy / max(count - (degree + 1) * tau, count / 2))
    return sigma, rho, count


def fit_noise(xs: np.ndarray, values: np.ndarray, place: float, h: float,
              budget: float) -> FitNoise | None:
    """The noise of :func:`local_fit` at ``place``, measured on the points up to ``budget``
    (see the module); None with fewer than 4 points there.

    >>> x = np.arange(200.); v = 3 - 0.001 * x + np.where(x % 2 == 0, 0.01, -0.01)
    >>> n = fit_noise(x, v, 199., 0.0, 199.); round(n.point, 3), n.sigma == n.point, n.rho
    (0.01, True, 0.0)
    """
    x, y = _finite(xs, values)
    if not x.size or not x[0] <= place <= x[-1]:
        return None
    start = x[0] + (1 - _STRETCH) * (budget - x[0])  # the last fifth of the run to the budget
    enough = x[max(int(np.searchsorted(x, budget, side="right")) - _POINTS, 0)]
    x, y = _between(x, y, min(start, enough, place - h), max(budget, place + h))
    u, y, a, w = _scaled(x, y, np.array([place, budget, start]), h)
    found = _scatter(u, y, float(a[1]), float(a[2]))
    if found is None:
        return None
    sigma, rho, count = found
    _lo, weights = _weights(u, float(a[0]), w)
    form = _ar1_form(weights, rho)
    effective = float(np.sum(weights) ** 2 / form) if form > 0 else float(weights.size)
    return FitNoise(sigma * math.sqrt(max(form, 0.0)), sigma, rho, count,
                    min(effective, float(weights.size)))


def run_curve(run: Run, series: pl.DataFrame, metric: str, axis: str, width: float, *,
              read: str | None = None) -> np.ndarray:
    """:func:`metric_curve` of one run's ``series`` (x, value) of ``metric`` on ``axis``,
    worked out once per run for the summary and the verdict alike (``read``: the metric whose
    kind decides how it is read, ``metric`` itself by default)."""
    how = read or metric
    return run.memo(("curve", metric, how, axis, width), lambda: metric_curve(
        series.get_column("x").to_numpy(), series.get_column("value").to_numpy(), how, width))


def metric_curve(xs: np.ndarray, raw: np.ndarray, metric: str, width: float) -> np.ndarray:
    """The curve ``metric``'s crossings are read off at each of its points (see the module)."""
    return raw if is_eval(metric) else local_fit(xs, raw, xs, width)


def metric_value(xs: np.ndarray, raw: np.ndarray, metric: str, x: float | None,
                 width: float) -> float | None:
    """``metric``'s value at ``x`` (see the module); None outside the run's points.

    >>> xs = np.array([0., 10.]); metric_value(xs, np.array([1., 3.]), "eval/loss", 2.5, 0.0)
    1.5
    """
    if x is None:
        return None
    keep = np.isfinite(raw) & np.isfinite(xs)
    if not keep.any() or not xs[keep][0] <= x <= xs[keep][-1]:
        return None
    if is_eval(metric):
        return float(np.interp(x, xs[keep], raw[keep]))
    fitted = local_fit(xs, raw, np.array([x]), width)[0]
    return float(fitted) if np.isfinite(fitted) else None
