"""Smoothing on all points, before any downsampling for drawing.

- ``tb:W``: TensorBoard's debiased EMA exactly (weight W in [0, 1), by point index; non-finite
  values passed through and not counted; a constant series unchanged). Adjusted exponential
  weighting equals TensorBoard's debiasing: Σ wⁿ⁻ʲ·vⱼ ÷ Σ wⁿ⁻ʲ = last ÷ (1 − wⁿ).
- ``50M`` / ``2000`` / ``5%``: an x-aware EMA whose half-life is given in axis units (or as a
  percentage of the runs' common x range), so runs logged every step and every 10 steps
  smooth alike: yₜ = αₜ·vₜ + (1 − αₜ)·yₜ₋₁ with αₜ = 1 − 2^(−Δxₜ / half-life).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from ..errors import UsageError

__all__ = ["Smoothing", "parse_smoothing", "smooth_expr", "smoothing_scale"]

_SUFFIX = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9, "T": 1e12}
#: Resolution of the x-aware EMA on the integer time index polars needs: a millionth of a
#: half-life.
_TICKS = 1_000_000


@dataclass(frozen=True)
class Smoothing:
    """``kind`` is ``"tb"`` (``value`` = weight) or ``"x"`` (``value`` = half-life in axis
    units; ``fraction`` set when it was given as a share of the x range)."""

    kind: str
    value: float
    fraction: float | None = None

    def resolved(self, x_range: float) -> Smoothing:
        """A percentage half-life turned into axis units for a given x range; a half-life too
        small for the range to be worked out in 64 bits (a millionth of one per tick) is
        refused."""
        if self.fraction is not None:
            return Smoothing("x", max(self.fraction * x_range, 1e-12))
        if self.kind == "x" and x_range / self.value * _TICKS >= 2.0 ** 63:
            raise UsageError(f"--smooth {self.value:g}: that half-life is "
                             f"{x_range / self.value:.2g} times shorter than the x range "
                             f"({x_range:,.0f}), past what the smoothing can work out; give "
                             f"one of at least {x_range / 2.0 ** 63 * _TICKS * 1.01:.3g}, or "
                             "a percentage of the range such as 1%")
        return self

    def describe(self, x: str) -> str:
        if self.kind == "tb":
            return f"TensorBoard EMA, weight {self.value:g}"
        share = f" ({self.fraction:.0%} of the range)" if self.fraction is not None else ""
        return f"EMA with a half-life of {self.value:,.6g} {x}{share}"


def parse_smoothing(spec: str | float | None) -> Smoothing | None:
    """``"tb:0.6"``, ``"50M"``, ``"2000"``, ``"5%"`` (or a float half-life) into a Smoothing.

    A bare number in [0, 1) is TensorBoard's weight (what a TensorBoard user types); a
    half-life is 1 or more, or a percentage of the range.

    >>> parse_smoothing("tb:0.9"), parse_smoothing("50M").value, parse_smoothing("5%").fraction
    (Smoothing(kind='tb', value=0.9, fraction=None), 50000000.0, 0.05)
    >>> parse_smoothing("0.6"), parse_smoothing(0.6) == parse_smoothing("tb:0.6")
    (Smoothing(kind='tb', value=0.6, fraction=None), True)
    """
    if spec is None or spec == "":
        return None
    if isinstance(spec, (int, float)):
        spec = str(spec)
    text = spec.strip()
    if text.startswith("tb:"):
        weight = _number(text[3:], spec)
        if not 0 <= weight < 1:
            raise UsageError(f"--smooth {spec!r}: the TensorBoard weight must be in [0, 1)")
        return Smoothing("tb", weight)
    if text.endswith("%"):
        share = _number(text[:-1], spec) / 100
        if not 0 < share <= 1:
            raise UsageError(f"--smooth {spec!r}: a percentage must be in (0, 100]")
        return Smoothing("x", 0.0, share)
    match = re.fullmatch(r"([0-9.eE+-]+)\s*([kKMGBT]?)", text)
    if not match:
        raise UsageError(f"--smooth {spec!r}: expected tb:WEIGHT, a half-life such as 50M, "
                         "or a percentage of the range such as 5%")
    number = _number(match.group(1), spec)
    if not match.group(2) and 0 <= number < 1:
        return Smoothing("tb", number)
    half_life = number * _SUFFIX[match.group(2)]
    if half_life <= 0:
        raise UsageError(f"--smooth {spec!r}: the half-life must be positive")
    return Smoothing("x", half_life)


def _number(text: str, spec: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"--smooth {spec!r}: {text!r} is not a number") from None


def smooth_expr(smoothing: Smoothing, *, value: str = "value", x: str = "x") -> pl.Expr:
    """The smoothed ``value`` column of one series sorted by ``x`` (use ``.over(...)`` for many).

    Non-finite values are passed through unchanged and do not enter the average.
    """
    raw = pl.col(value)
    finite = raw.is_finite()
    masked = pl.when(finite).then(raw)
    if smoothing.kind == "tb":
        ema = masked.ewm_mean(alpha=1 - smoothing.value, adjust=True, ignore_nulls=True) \
            if smoothing.value > 0 else masked
        constant = raw.n_unique() == 1
        return pl.when(finite & ~constant).then(ema).otherwise(raw)
    # from the series' first x: the EMA sees only distances, and 10^16 tokens (or a logged
    # counter that says so) over a half-life of a hundredth of a token left 64 bits
    ticks = ((pl.col(x) - pl.col(x).min()) / smoothing.value * _TICKS).round().cast(pl.Int64)
    ema = masked.ewm_mean_by(ticks, half_life=f"{_TICKS}i")
    return pl.when(finite).then(ema).otherwise(raw)


def smoothing_scale(smoothing: Smoothing, spacing: float, x_range: float, x: str) -> str | None:
    """Why an x-aware half-life does nothing useful, if it does not: below the spacing of the
    points (no smoothing at all) or above the x range (a flat line); else None.

    >>> smoothing_scale(Smoothing("x", 0.6), 5120.0, 1e5, "tokens")[:48]
    '--smooth 0.6: a half-life of 0.6 tokens is below'
    >>> smoothing_scale(Smoothing("x", 20000.0), 5120.0, 1e5, "tokens") is None
    True
    """
    if smoothing.kind != "x" or smoothing.fraction is not None:
        return None
    given = f"--smooth {smoothing.value:g}: a half-life of {smoothing.value:,.6g} {x}"
    if spacing > 0 and smoothing.value < spacing:
        return (f"{given} is below the spacing of the logged points ({spacing:,.6g} {x}), so "
                "the curves are not smoothed at all; give a share of the range such as 5%, or "
                "tb:0.6 for TensorBoard's weight")
    if x_range > 0 and smoothing.value > x_range:
        return (f"{given} is longer than the x range ({x_range:,.6g} {x}), so the curves are "
                "flattened to their start; give a share of the range such as 5%")
    return None
