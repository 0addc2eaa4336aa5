"""How much of a difference between runs is noise.

- Seed groups (two or more runs per arm): Welch's 95% interval of the difference of the arms'
  means, with the Welch–Satterthwaite degrees of freedom (:func:`welch`).
- One run per arm: the metric's own scatter near the budget. For eval metrics the step-to-step
  scatter of the last evals: each eval against the straight line through its two neighbours
  (:func:`eval_scatter`; taken as independent from eval to eval: 3 to 20 evals cannot measure
  a correlation); for per-step training metrics the noise of the local fit with the points'
  autocorrelation (:func:`.fit.fit_noise`). Neither knows the seed-to-seed variation, which
  single runs cannot show and which often exceeds it: their lead is ``unreplicated``, and
  :func:`seed_sd_to_settle` says how many seeds would settle it.

``Z95`` turns a standard deviation into the half-width of a 95% band.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["SETTLE_SEEDS", "Z95", "Scatter", "eval_scatter", "seed_sd_to_settle", "t_quantile",
           "welch"]

Z95 = 1.959963984540054
#: The last evals that measure an eval metric's scatter: those in the last half of the budget,
#: at least 3 (so that one has two neighbours), at most 20.
_EVAL_STRETCH, _EVAL_MIN, _EVAL_MAX = 0.5, 3, 20
#: The seeds per arm whose worth a single-run verdict states (:func:`seed_sd_to_settle`).
SETTLE_SEEDS = (3, 5)


@dataclass(frozen=True)
class Scatter:
    """A run's noise near the budget: ``sigma`` (one standard deviation), from ``points``
    points; ``bend`` when every eval sat on the same side of its neighbours' line (the curve's
    own bend is then part of ``sigma``, which overstates the noise)."""

    sigma: float
    points: int
    bend: bool = False


def _before(xs: np.ndarray, values: np.ndarray, budget: float) -> tuple[np.ndarray, np.ndarray]:
    keep = np.isfinite(values) & np.isfinite(xs) & (xs <= budget)
    return xs[keep], values[keep]


def eval_scatter(xs: np.ndarray, values: np.ndarray, budget: float) -> Scatter | None:
    """The step-to-step scatter of the last evals at or before ``budget``.

    Each inner eval's distance from the line through its neighbours, d = v − (w·v₋ + (1−w)·v₊)
    with w = (x₊ − x)/(x₊ − x₋), has variance σ²·(1 + w² + (1−w)²) for independent noise σ.

    >>> x = np.arange(1., 9); v = 10 - x + np.where(x % 2 == 0, 0.1, -0.1)  # d = ±0.2
    >>> s = eval_scatter(x, v, 8.0); round(s.sigma, 4), s.points, s.bend   # 0.2 / √1.5
    (0.1633, 5, False)
    """
    xs, values = _before(xs, values, budget)
    recent = int(np.count_nonzero(xs >= budget * (1 - _EVAL_STRETCH)))
    count = min(max(recent, _EVAL_MIN), _EVAL_MAX, xs.size)
    if count < _EVAL_MIN:
        return None
    xs, values = xs[-count:], values[-count:]
    span = xs[2:] - xs[:-2]
    if (span <= 0).any():
        return None
    w = (xs[2:] - xs[1:-1]) / span
    d = values[1:-1] - (w * values[:-2] + (1 - w) * values[2:])
    sigma = math.sqrt(float(np.mean(d ** 2 / (1 + w ** 2 + (1 - w) ** 2))))
    return Scatter(sigma, count, bool((d > 0).all() or (d < 0).all()))


def seed_sd_to_settle(difference: float, seeds: int) -> float:
    """The largest seed-to-seed standard deviation at which ``seeds`` runs of each arm would
    call a true ``difference`` clear on average: Welch's half-width with equal spreads,
    t(0.975, 2(n − 1))·s·√(2/n), below the difference.

    >>> round(seed_sd_to_settle(0.1, 3), 4), round(seed_sd_to_settle(0.1, 5), 4)
    (0.0441, 0.0686)
    """
    return difference / (t_quantile(0.975, 2 * (seeds - 1)) * math.sqrt(2 / seeds))


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float, float] | None:
    """Mean of ``a`` − mean of ``b``, its 95% interval (low, high) and the Welch degrees of
    freedom; None unless both hold two or more values.

    >>> [round(v, 3) for v in welch(np.array([3.0, 3.2, 3.1]), np.array([2.0, 2.1, 1.9]))]
    [1.1, 0.873, 1.327, 4.0]
    """
    if a.size < 2 or b.size < 2:
        return None
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    diff = float(a.mean() - b.mean())
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, diff, diff, float(a.size + b.size - 2)
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    half = t_quantile(0.975, df) * se
    return diff, diff - half, diff + half, float(df)


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t with ``df`` degrees of freedom, by bisection
    on its distribution function.

    >>> [round(t_quantile(0.975, df), 3) for df in (1, 2, 4, 10, 1e6)]
    [12.706, 4.303, 2.776, 2.228, 1.96]
    """
    low, high = 0.0, 1e4
    for _ in range(200):
        mid = (low + high) / 2
        if _t_cdf(mid, df) < p:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def _t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) for t ≥ 0: 1 − I_x(df/2, 1/2)/2 with x = df/(df + t²)."""
    return 1 - 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b) (continued fraction, Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):
        return 1 - _betainc(b, a, 1 - x)
    tiny, f, c, d = 1e-300, 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        if i == 0:
            numerator = 1.0
        elif i % 2 == 0:
            numerator = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            numerator = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1 + numerator * d
        d = 1 / (d if abs(d) > tiny else tiny)
        c = 1 + numerator / c if abs(c) > tiny else 1 + numerator / tiny
        f *= c * d
        if abs(1 - c * d) < 1e-14:
            break
    return front * (f - 1) / a
