"""The critical batch size from runs of one model at several global batches (McCandlish et al.
2018, "An Empirical Model of Large-Batch Training").

Runs that reach a common loss need S optimizer steps and E samples to get there; the model is

    (S / S_min − 1) · (E / E_min − 1) = 1,        B_crit = E_min / S_min   (samples per step)

With a constant global batch B, E = B · S, and the model is the same as two straight lines:

    S = S_min + E_min · (1/B)        (steps to target)
    E = E_min + S_min · B            (samples to target)

so S_min and E_min are the intercept and slope of S against 1/B: exact from two batch sizes,
least squares (each run weighted by 1/S, so every run's relative miss counts alike) from more.
Two points always fit exactly and cannot check that the runs follow the hyperbola; a third
batch size is what tests it (its residual says how well).

Steps and samples to target are where each run's curve crosses the target
(:func:`~.crossing.crossing`, interpolated between the two points around it, never
extrapolated): eval metrics as logged, training metrics on the local linear fit of the raw
points over the samples axis (:func:`~.fit.local_fit`, half-window 2% of the common samples
range, or ``smooth``). A one-sided EMA lags by about its half-life ÷ ln 2 in samples, which
adds samples to every run's E and biases E_min; the mean of an EMA run both ways has no lag
but, on a loss that bends as fast as it does early in training, a bias of about 12 times the
local fit's (the kernel's variance, 4.2·h² against h²/3), which moved crossings late. The fit
assumes the runs differ in the global batch only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ..errors import InputError, MissingInfoError, RuncompareError
from ..model import Finding, Run
from .crossing import at_position, crossing
from .fit import fit_width, local_fit
from .kinds import is_eval
from .smooth import Smoothing, parse_smoothing
from .summary import check_metrics, higher_is_better, main_metric

__all__ = ["BatchCrossing", "CriticalBatch", "critical_batch", "fit_critical_batch"]

#: Facts that should be equal across the runs for the fit to mean anything (batch aside).
_SAME = {"seq_len": "sequence length", "trainable_parameters": "trainable parameters",
         "learning_rate": "learning rate", "lr_scheduler_type": "learning-rate schedule",
         "num_examples": "training examples", "warmup_steps": "warmup steps",
         "max_grad_norm": "gradient clipping", "weight_decay": "weight decay"}
#: How many targets the curve of B_crit over the loss holds by default.
_CURVE_TARGETS = 5
_HALF_LIFE = 0.02


@dataclass(frozen=True)
class BatchCrossing:
    """One run's global batch and the steps and samples at which it reached the target."""

    run: str
    global_batch: int
    steps_to_target: float | None
    samples_to_target: float | None

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "global_batch": self.global_batch,
                "steps_to_target": self.steps_to_target,
                "samples_to_target": self.samples_to_target}


@dataclass(frozen=True)
class Fit:
    """S_min, E_min and B_crit fitted at one target; ``residuals`` maps each run to its fitted
    steps ÷ measured steps − 1; ``exact`` when two batch sizes determined the fit."""

    target: float
    s_min: float | None
    e_min: float | None
    b_crit: float | None
    residuals: dict[str, float]
    exact: bool
    batches: int


@dataclass
class CriticalBatch:
    """The fit at ``target`` (``runs``, ``s_min``, ``e_min``, ``b_crit``, ``residuals``), the
    batches it was fitted on (``batch_range``), and ``curve``: the fit at several targets."""

    metric: str
    target: float
    runs: list[BatchCrossing]
    s_min: float | None
    e_min: float | None
    b_crit: float | None
    batch_range: tuple[int, int]
    residuals: dict[str, float]
    exact: bool
    curve: list[Fit] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    def hyperbola(self, points: int = 60) -> tuple[np.ndarray, np.ndarray]:
        """Steps and samples along the fitted curve, for batches from a quarter of the smallest
        to four times the largest run's: S = S_min(1 + B_crit/B), E = E_min(1 + B/B_crit)."""
        if self.s_min is None or self.e_min is None or self.b_crit is None:
            return np.array([]), np.array([])
        low, high = self.batch_range
        batches = np.geomspace(low / 4, high * 4, points)
        return self.s_min * (1 + self.b_crit / batches), self.e_min * (1 + batches / self.b_crit)

    def to_json(self) -> dict[str, Any]:
        """The object ``runcompare critical-batch --json`` prints (docs/architecture.md's contracts)."""
        return {"metric": self.metric, "target": self.target,
                "runs": [r.to_json() for r in self.runs], "s_min": self.s_min,
                "e_min": self.e_min, "b_crit": self.b_crit,
                "batch_range": list(self.batch_range), "residuals": self.residuals,
                "exact": self.exact,
                "curve": [{"target": f.target, "s_min": f.s_min, "e_min": f.e_min,
                           "b_crit": f.b_crit, "batches": f.batches} for f in self.curve],
                "findings": [f.to_json() for f in self.findings]}


def fit_critical_batch(batches: Sequence[float], steps: Sequence[float]) -> tuple[
        float, float, list[float]]:
    """S_min, E_min and each run's fitted ÷ measured steps − 1, from S = S_min + E_min / B.

    >>> s_min, e_min, res = fit_critical_batch([8, 32], [150, 60])   # exact with two
    >>> round(s_min, 6), round(e_min, 6), round(e_min / s_min, 6)
    (30.0, 960.0, 32.0)
    """
    b = np.asarray(batches, dtype=float)
    s = np.asarray(steps, dtype=float)
    design = np.column_stack([np.ones_like(b), 1 / b])
    weight = 1 / s  # relative residuals: every run's miss counts alike
    coef, *_ = np.linalg.lstsq(design * weight[:, None], s * weight, rcond=None)
    s_min, e_min = float(coef[0]), float(coef[1])
    fitted = design @ coef
    return s_min, e_min, (fitted / s - 1).tolist()


def critical_batch(runs: Sequence[Run], *, metric: str | None = None,
                   target: float | None = None,
                   targets: Sequence[float] | None = None,
                   smooth: str | Smoothing | None = None) -> CriticalBatch:
    """Fit the critical batch of ``runs`` (one model at several global batches) at ``target``
    (default: the worst best value, a loss every run reaches), and at ``targets`` for the
    curve (default: five from that target up a third of the way to the runs' first values).
    ``smooth`` sets the training metrics' fit window as ``--smooth`` does, on the samples
    axis (``"1%"``, ``"20000"``, ``"tb:0"`` for the raw points).
    """
    runs = sorted(runs, key=_global_batch)
    if len(runs) < 2:
        raise InputError("the critical batch needs runs at two or more global batches; give "
                         "runs of one model that differ only in the global batch")
    metric = metric or main_metric(runs)
    if metric is None:
        raise InputError("the runs share no metric; name one each logged with --metric")
    check_metrics(runs, [metric])
    higher = higher_is_better(metric)
    smoothing = _smoothing(runs, metric, smooth)  # once: it looks at every run
    series = {run.name: _series(run, metric, smoothing) for run in runs}
    batches = {run.name: _global_batch(run) for run in runs}
    goal = target if target is not None else _reached_by_all(series.values(), higher)
    findings = _differences(runs) + _ramps(runs)
    crossings = [_crossing(name, batches[name], frame, goal, higher)
                 for name, frame in series.items()]
    fit = _fit(goal, crossings, findings)
    levels = list(targets) if targets else _default_targets(series.values(), goal, higher)
    curve = [_fit(t, [_crossing(n, batches[n], f, t, higher) for n, f in series.items()], None)
             for t in levels]
    span = (min(batches.values()), max(batches.values()))
    findings += _range_findings(fit, span)
    return CriticalBatch(metric=metric, target=goal, runs=crossings, s_min=fit.s_min,
                         e_min=fit.e_min, b_crit=fit.b_crit, batch_range=span,
                         residuals=fit.residuals, exact=fit.exact, curve=curve,
                         findings=findings)


def _smoothing(runs: Sequence[Run], metric: str,
               smooth: str | Smoothing | None) -> Smoothing | None:
    """None for eval metrics (as logged); else ``smooth`` resolved on the common samples
    range, by default 2% of it."""
    if is_eval(metric):
        return None
    span = min(float(run.scalars.get_column("samples").max() or 0) for run in runs)  # type: ignore[arg-type]
    given = smooth if isinstance(smooth, Smoothing) else parse_smoothing(smooth)
    chosen = given if given is not None else Smoothing("x", 0.0, _HALF_LIFE)
    return chosen.resolved(max(span, 1e-12))


def _series(run: Run, metric: str, smoothing: Smoothing | None) -> pl.DataFrame:
    """step, samples and the curve of ``metric`` (as logged, or its local fit), by step."""
    frame = (run.points_of(metric).filter(pl.col("samples").is_not_null())
             .sort("step", maintain_order=True)
             .select(pl.col("step").cast(pl.Float64), pl.col("samples").cast(pl.Float64),
                     "value"))
    if frame.is_empty():
        raise MissingInfoError(f"run {run.name!r} has no {metric} on the samples axis; it "
                               f"needs the global batch: pass --set {run.name}:global_batch=N")
    if smoothing is None:
        return frame.with_columns(pl.col("value").alias("curve"))
    samples = frame.get_column("samples").to_numpy()
    width = fit_width(smoothing, [samples])
    return frame.with_columns(curve=pl.Series(local_fit(samples, frame.get_column(
        "value").to_numpy(), samples, width)))


def _global_batch(run: Run) -> int:
    value = run.batch.global_batch.value
    if value is None:
        raise MissingInfoError(f"run {run.name!r} has no known global batch; pass --set "
                               f"{run.name}:per_device_batch=N, grad_accum=N and world_size=N "
                               "(or global_batch=N)")
    return int(value)


def _reached_by_all(frames: Any, higher: bool) -> float:
    """The worst of the runs' best values: a target every run reaches."""
    bests = []
    for frame in frames:
        values = frame.get_column("curve").to_numpy()
        finite = values[np.isfinite(values)]
        if not finite.size:
            raise InputError("a run has no finite value of the metric; the critical batch "
                             "needs every run to reach a common target")
        bests.append(finite.max() if higher else finite.min())
    return float(min(bests) if higher else max(bests))


def _default_targets(frames: Any, goal: float, higher: bool) -> list[float]:
    """Five targets from ``goal`` a third of the way towards the runs' first values."""
    firsts = [float(f.get_column("curve")[0]) for f in frames]
    start = max(firsts) if higher else min(firsts)
    if not np.isfinite(start) or start == goal:
        return [goal]
    return [float(goal + (start - goal) * k / (3 * (_CURVE_TARGETS - 1)))
            for k in range(_CURVE_TARGETS)]


def _crossing(name: str, batch: int, frame: pl.DataFrame, goal: float,
              higher: bool) -> BatchCrossing:
    position = crossing(frame.get_column("curve").to_numpy(), goal, higher=higher)
    return BatchCrossing(name, batch, at_position(frame.get_column("step").to_numpy(), position),
                         at_position(frame.get_column("samples").to_numpy(), position))


def _fit(goal: float, crossings: list[BatchCrossing], findings: list[Finding] | None) -> Fit:
    """The fit over the runs that reached ``goal`` after their first point."""
    usable = [c for c in crossings if c.steps_to_target]
    sizes = {c.global_batch for c in usable}
    note = findings.append if findings is not None else (lambda _: None)
    for c in crossings:
        if c not in usable:
            note(Finding("warning", "target-not-reached",
                         f"run {c.run} does not cross {goal:.4g} after its first point; it is "
                         "left out of the fit", c.run))
    if len(sizes) < 2:
        note(Finding("error", "too-few-batches",
                     f"fewer than two global batches reach {goal:.4g}; S_min and E_min "
                     "cannot be fitted"))
        return Fit(goal, None, None, None, {}, False, len(sizes))
    s_min, e_min, residuals = fit_critical_batch([c.global_batch for c in usable],
                                                 [c.steps_to_target for c in usable])  # type: ignore[misc]
    exact = len(sizes) == 2
    if exact:
        note(Finding("info", "two-batches-exact",
                     "two global batches determine S_min and E_min exactly (zero residuals); "
                     "they cannot check that the runs follow (S/S_min − 1)(E/E_min − 1) = 1: "
                     "a run at a third batch would"))
    if s_min <= 0 or e_min <= 0:
        note(Finding("warning", "fit-not-physical",
                     f"the fit gives S_min {s_min:.4g} and E_min {e_min:.4g}; both must be "
                     "positive, so the runs do not follow the model and there is no B_crit"))
        return Fit(goal, s_min, e_min, None, dict(zip((c.run for c in usable), residuals)),
                   exact, len(sizes))
    return Fit(goal, s_min, e_min, e_min / s_min,
               dict(zip((c.run for c in usable), residuals)), exact, len(sizes))


def _range_findings(fit: Fit, span: tuple[int, int]) -> list[Finding]:
    if fit.b_crit is None:
        return []
    low, high = span
    where = (f"B_crit {fit.b_crit:,.4g} was fitted on global batches {low:,}–{high:,}")
    if low <= fit.b_crit <= high:
        return [Finding("info", "b-crit-in-range", f"{where}, and lies inside that range")]
    return [Finding("warning", "b-crit-outside-range",
                    f"{where} and lies outside that range: it is an extrapolation of the fitted "
                    "curve; runs at batches around it would check it")]


def _differences(runs: Sequence[Run]) -> list[Finding]:
    """A finding per fact (besides the batch) whose known values differ across the runs."""
    out = []
    for key, label in _SAME.items():
        values = {run.name: run.facts[key].value for run in runs
                  if key in run.facts and run.facts[key].value is not None}
        if len(set(map(str, values.values()))) > 1:
            listing = ", ".join(f"{name} {value}" for name, value in values.items())
            out.append(Finding("warning", "not-batch-only",
                               f"the runs differ in {label} ({listing}); the critical-batch fit "
                               "assumes they differ in the global batch only"))
    return out


def _ramps(runs: Sequence[Run]) -> list[Finding]:
    ramped = [run.name for run in runs if run.batch.ramp]
    if not ramped:
        return []
    return [Finding("warning", "batch-ramp",
                    f"{', '.join(ramped)} change the global batch during training; the model "
                    "assumes a constant batch per run (the largest is used)")]


def batch_only_fit(runs: Sequence[Run]) -> CriticalBatch | None:
    """The critical-batch fit of ``runs`` when they differ in the global batch and, as far as
    their facts show, in nothing else, and a B_crit was fitted (what the compare report
    shows); None otherwise."""
    batches = {run.batch.global_batch.value for run in runs}
    if len(runs) < 2 or None in batches or len(batches) < 2:
        return None
    try:
        result = critical_batch(runs)
    except RuncompareError:
        return None
    if result.b_crit is None or any(f.code == "not-batch-only" for f in result.findings):
        return None
    return result
