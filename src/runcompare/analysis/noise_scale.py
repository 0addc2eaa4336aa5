"""The simple gradient noise scale B_simple = tr(Σ) / |G|² from the logged gradient norms of two
runs at different global batches (McCandlish et al. 2018, appendix A.1).

A gradient averaged over B samples has E|G_B|² = |G|² + tr(Σ)/B, so two batches B_s < B_b give

    |G|²  = (B_b·|G_b|² − B_s·|G_s|²) / (B_b − B_s)
    tr(Σ) = (|G_s|² − |G_b|²) / (1/B_s − 1/B_b)

Each run's squared norms are smoothed (an EMA with a half-life of 5% of the common range, as
single norms are noisy) and read at the same points of a common samples or tokens axis (the
union of both runs' logged x inside the range both cover, linear between points, never beyond
a run's range). B_simple is in sequences (samples per step), and in tokens when the sequence
length is known. Where the smoothed norms give |G|² ≤ 0 or tr(Σ) ≤ 0 the estimate is left
out (null): noise, not a negative noise scale. Overall, the estimate from the mean squared norms
over the common range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ..errors import InputError, MissingInfoError
from ..model import Finding, Run, require_axis
from .align import _interp, series
from .smooth import Smoothing, smooth_expr

__all__ = ["ASSUMPTIONS", "NoiseScale", "noise_scale"]

GRAD_NORM = "train/grad_norm"
_HALF_LIFE = 0.05
#: A share of the norms at the clipping threshold above which they are taken as clipped values.
_CLIPPED_SHARE = 0.5

ASSUMPTIONS = (
    "the logged grad norms are of the gradient before clipping (the HF Trainer logs them so)",
    ("the gradient is the mean over the global batch, and the two runs' gradients at the same "
     "samples are taken as draws from one distribution: the runs' divergence (different "
     "parameters at the same samples) is ignored"),
    "the noise scale is of the raw gradient: Adam's preconditioning is ignored",
)


@dataclass
class NoiseScale:
    """B_simple over training (``curve``: x, grad_sq, trace, b_simple) and overall."""

    runs: tuple[str, str]
    batches: tuple[int, int]
    x: str
    b_simple: float | None
    grad_sq: float | None
    trace: float | None
    seq_len: int | None
    curve: pl.DataFrame
    assumptions: tuple[str, ...] = ASSUMPTIONS
    findings: list[Finding] = field(default_factory=list)

    @property
    def b_simple_tokens(self) -> float | None:
        """B_simple in tokens: sequences × sequence length, when it is known."""
        if self.b_simple is None or self.seq_len is None:
            return None
        return self.b_simple * self.seq_len

    def to_json(self) -> dict[str, Any]:
        return {"runs": [{"run": r, "global_batch": b} for r, b in zip(self.runs, self.batches)],
                "x": self.x, "b_simple": self.b_simple, "b_simple_tokens": self.b_simple_tokens,
                "grad_sq": self.grad_sq, "trace": self.trace,
                "curve": self.curve.to_dicts(), "assumptions": list(self.assumptions),
                "findings": [f.to_json() for f in self.findings]}


def estimate(b_small: float, b_big: float, g2_small: np.ndarray | float,
             g2_big: np.ndarray | float) -> tuple[Any, Any]:
    """|G|² and tr(Σ) from the mean squared norms at two batches.

    >>> g2, tr = estimate(4, 64, 1.0 + 30 / 4, 1.0 + 30 / 64)   # |G|² = 1, tr(Σ) = 30
    >>> round(g2, 9), round(tr, 9)
    (1.0, 30.0)
    """
    grad_sq = (b_big * g2_big - b_small * g2_small) / (b_big - b_small)
    trace = (g2_small - g2_big) / (1 / b_small - 1 / b_big)
    return grad_sq, trace


def noise_scale(a: Run, b: Run, *, x: str | None = None) -> NoiseScale:
    """B_simple from the grad norms of runs ``a`` and ``b`` (different global batches) on the
    ``x`` axis (``tokens`` when both have it, else ``samples``)."""
    axis = x or ("tokens" if all(_has(r, "tokens") for r in (a, b)) else "samples")
    for run in (a, b):
        require_axis(run, axis)
        _check_norms(run)
    small, big = sorted((a, b), key=_batch)
    if _batch(small) == _batch(big):
        raise InputError(f"runs {a.name!r} and {b.name!r} share the global batch "
                         f"{_batch(a)}; the noise scale needs two different batches")
    frames = [series(run, GRAD_NORM, axis).filter(pl.col("value").is_finite())
              for run in (small, big)]
    low = max(float(f.get_column("x").cast(pl.Float64).min() or 0.0)
              for f in frames) if all(f.height for f in frames) else 0.0
    high = min(float(f.get_column("x").cast(pl.Float64).max() or 0.0)
               for f in frames) if all(f.height for f in frames) else 0.0
    if not low < high:
        raise InputError(f"runs {small.name!r} and {big.name!r} logged grad norms on no common "
                         f"stretch of the {axis} axis")
    grid = np.unique(np.concatenate([f.get_column("x").to_numpy() for f in frames]))
    grid = grid[(grid >= low) & (grid <= high)]
    smoothing = Smoothing("x", _HALF_LIFE * (high - low))
    g2 = [_squared(f, smoothing, grid) for f in frames]
    bs, bb = _batch(small), _batch(big)
    grad_sq, trace = estimate(bs, bb, g2[0], g2[1])
    valid = (grad_sq > 0) & (trace > 0)
    curve = pl.DataFrame({"x": grid, "g2_small": g2[0], "g2_big": g2[1],
                          "grad_sq": np.where(valid, grad_sq, np.nan),
                          "trace": np.where(valid, trace, np.nan),
                          "b_simple": np.where(valid, trace / np.where(valid, grad_sq, 1.0),
                                               np.nan)}).fill_nan(None)
    mean_g, mean_t = estimate(bs, bb, float(np.mean(g2[0])), float(np.mean(g2[1])))
    overall = mean_t / mean_g if mean_g > 0 and mean_t > 0 else None
    findings = _findings(small, big, int(np.count_nonzero(~valid)), grid.size, overall)
    seq = {r.batch.seq_len.value for r in (small, big)}
    return NoiseScale(runs=(small.name, big.name), batches=(bs, bb), x=axis, b_simple=overall,
                      grad_sq=mean_g if overall else None, trace=mean_t if overall else None,
                      seq_len=seq.pop() if len(seq) == 1 else None, curve=curve,
                      findings=findings)


def _has(run: Run, axis: str) -> bool:
    return run.scalars.get_column(axis).null_count() < run.scalars.height


def _batch(run: Run) -> int:
    value = run.batch.global_batch.value
    if value is None:
        raise MissingInfoError(f"run {run.name!r} has no known global batch; pass --set "
                               f"{run.name}:global_batch=N")
    return int(value)


def _check_norms(run: Run) -> None:
    """Refuse a run without grad norms, or whose norms are the clipped values."""
    norms = run.scalars.filter(pl.col("metric") == GRAD_NORM).get_column("value").to_numpy()
    norms = norms[np.isfinite(norms)]
    if norms.size < 2:
        raise MissingInfoError(f"run {run.name!r} logged no {GRAD_NORM} (two or more finite "
                               "values needed); the noise scale needs the gradient norm before "
                               "clipping at every logging step")
    clip = run.facts.get("max_grad_norm")
    limit = None if clip is None or clip.value is None else float(clip.value)
    if limit and limit > 0:
        at_limit = np.isclose(norms, limit, rtol=1e-6, atol=0)
        if norms.max() <= limit * (1 + 1e-6) and at_limit.mean() > _CLIPPED_SHARE:
            raise InputError(f"run {run.name!r}: {int(at_limit.sum())} of {norms.size} grad "
                             f"norms equal max_grad_norm {limit:g} ({clip.source}), so they are "  # type: ignore[union-attr]
                             "the clipped values; the noise scale needs norms before clipping")


def _squared(frame: pl.DataFrame, smoothing: Smoothing, grid: np.ndarray) -> np.ndarray:
    """The run's squared norms, smoothed, at the grid's x."""
    squared = frame.with_columns(pl.col("value") ** 2).with_columns(
        smooth_expr(smoothing).alias("smoothed"))
    xs = squared.get_column("x").to_numpy()
    inside = (grid >= xs[0]) & (grid <= xs[-1])
    return _interp(grid, xs, squared.get_column("smoothed").to_numpy(), inside)


def _findings(small: Run, big: Run, left_out: int, points: int,
              overall: float | None) -> list[Finding]:
    out = []
    if left_out:
        out.append(Finding("info", "noise-scale-gaps",
                           f"at {left_out} of {points} points the norms gave |G|² ≤ 0 or "
                           "tr(Σ) ≤ 0 (the smaller batch's norm not above the larger's): "
                           "left out as noise"))
    if overall is None:
        out.append(Finding("warning", "noise-scale-undefined",
                           f"over the common range {small.name}'s squared norms are not above "
                           f"{big.name}'s as E|G_B|² = |G|² + tr(Σ)/B needs; no noise scale"))
    return out
