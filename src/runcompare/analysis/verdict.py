"""The answer: which run is better on the main metric, by how much, is it real, what it cost.

Decided at the common budget (the largest x every run reaches) on the fair axis: the compared
axis unless the audit finds it unfair for these runs (optimizer steps, micro-steps or epochs
while global batches differ, samples while sequence lengths differ), then tokens or samples.
Arms are the seed groups and the runs in none. The value of an arm is the mean of its runs'
values at the budget: as logged (interpolated) for eval metrics, on the smoothed curve for
per-step training metrics.

The call (:data:`CALLS`): ``clear`` when the difference between the leader and the runner-up
exceeds the noise (:mod:`.noise`: with two or more seeds in both arms, when Welch's 95%
interval excludes zero; otherwise when it exceeds the 95% band of the runs' own scatter near
the budget), ``within-noise`` when it does not (a tie) or the noise cannot be measured, and
``not-comparable`` when the runs share no budget or value, or the audit finds the metric or
the axis itself not comparable (a step that means different things, padding counted as
tokens on the tokens axis, training losses normalised differently across transformers
versions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ..audit import audit, propose_axis
from ..display import listing
from ..model import Finding, Run
from .crossing import at_position, crossing, value_at
from .kinds import is_eval
from .noise import Z95, eval_scatter, smoothing_factor, train_scatter, welch
from .smooth import Smoothing
from .summary import higher_is_better, metric_series
from .wording import compose, fairness_phrases

__all__ = ["CALLS", "Verdict", "decide"]

CALLS = ("clear", "within-noise", "not-comparable")
_STEP_AXES = ("step", "micro_step", "epoch")
#: Findings that make the metric or the axis itself not comparable, with the axes (None: any)
#: or metrics they concern.
_BREAKING = {"step-unit-mismatch": _STEP_AXES, "global-batch-mismatch": _STEP_AXES,
             "seq-len-mismatch": ("samples",), "padding-counted-as-tokens": ("tokens",)}
_COST_AXES = ("elapsed", "device_hours", "flops")


@dataclass(frozen=True)
class Verdict:
    """The comparison's answer in numbers and in words (``text``; ``str(verdict)``).

    ``values`` maps each arm (a seed group, or a run in none) to its value of ``metric`` at
    ``budget`` on ``axis``; ``difference`` (≥ 0) and ``relative`` compare the ``leader`` with
    the runner-up; ``noise`` says how the call was made; ``race`` holds the target and each
    arm's crossing of it; ``cost`` each arm's wall-clock, device-time and FLOPs to the budget
    and to the target, with the source of the numbers; ``fairness`` the audit's warnings in
    words.
    """

    text: str
    metric: str | None
    axis: str
    budget: float | None
    values: dict[str, float]
    leader: str | None
    difference: float | None
    relative: float | None
    noise: dict[str, Any] | None
    call: str
    cost: dict[str, Any] = field(default_factory=dict)
    race: dict[str, Any] = field(default_factory=dict)
    fairness: list[str] = field(default_factory=list)
    axis_reason: str | None = None
    #: each run's own value at the budget (an arm's value is the mean of its runs'), best first
    run_values: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.text

    def to_dict(self) -> dict[str, Any]:
        """The ``verdict`` object of ``runcompare RUN... --json`` (DESIGN.md's contract)."""
        return {"text": self.text, "metric": self.metric, "axis": self.axis,
                "budget": self.budget, "values": self.values, "leader": self.leader,
                "difference": self.difference, "relative": self.relative, "noise": self.noise,
                "call": self.call, "cost": self.cost, "race": self.race,
                "fairness": self.fairness, "axis_reason": self.axis_reason}


@dataclass
class _Arm:
    name: str
    runs: list[str]
    value: float | None = None
    members: list[float] = field(default_factory=list)
    sigma: float | None = None
    scatter: dict[str, Any] = field(default_factory=dict)
    race: dict[str, float | None] = field(default_factory=dict)
    cost: dict[str, float | None] = field(default_factory=dict)


def decide(runs: Sequence[Run], *, x: str, metric: str | None, target: float | None,
           groups: Mapping[str, Sequence[str]], smoothing: Smoothing | None,
           findings: Sequence[Finding] = ()) -> Verdict:
    """The verdict on ``metric`` for ``runs`` compared on ``x`` (see the module docstring).

    ``smoothing`` is the comparison's smoothing as given (a share of the range is resolved on
    the verdict's axis); ``findings`` are the runs' own findings.
    """
    axis, reason = _axis(runs, x)
    audited = audit(runs, x=axis) + [f for f in findings if f.run is not None]
    fairness = fairness_phrases(audited, axis=axis, metric=metric)
    if metric is None:
        return _empty("The runs share no metric to compare.", axis, reason, fairness)
    curve = _curve(runs, axis, x, smoothing)
    series = {run.name: metric_series(run, metric, axis, None if is_eval(metric) else curve)
              for run in runs}
    series = {name: s for name, s in series.items() if s is not None and s.height}
    if not series:
        return _empty(f"No run logged {metric} on {axis}.", axis, reason, fairness)
    budget = min(float(s.get_column("x")[-1]) for s in series.values())
    arms = _arms(groups, list(series))
    goal = target if target is not None else _worst(series, metric)
    for arm in arms:
        _measure(arm, {name: series[name] for name in arm.runs}, metric, budget, goal, curve)
    ranked = sorted((a for a in arms if a.value is not None),
                    key=lambda a: -a.value if higher_is_better(metric) else a.value)  # type: ignore[operator]
    noise, call = _call(ranked, metric)
    if len(ranked) < 2 or _breaks(audited, axis, metric):
        call = "not-comparable"
    parts = _Parts(metric=metric, axis=axis, budget=budget, ranked=ranked, goal=goal,
                   target_given=target is not None, noise=noise, call=call, reason=reason,
                   fairness=fairness, runs=list(runs), curve=curve)
    return _verdict(parts)


@dataclass
class _Parts:
    """Everything the words are made of (:func:`.wording.compose` reads it)."""

    metric: str
    axis: str
    budget: float
    ranked: list[_Arm]
    goal: float | None
    target_given: bool
    noise: dict[str, Any] | None
    call: str
    reason: str | None
    fairness: list[str]
    runs: list[Run]
    curve: Smoothing | None


def _verdict(parts: _Parts) -> Verdict:
    ranked = parts.ranked
    leader = ranked[0] if ranked else None
    difference = relative = None
    if len(ranked) >= 2 and leader is not None:
        runner = ranked[1]
        difference = abs(leader.value - runner.value)  # type: ignore[operator]
        relative = difference / abs(runner.value) if runner.value else None
    return Verdict(
        text=compose(parts), metric=parts.metric, axis=parts.axis, budget=parts.budget,
        values={a.name: a.value for a in ranked if a.value is not None},
        leader=leader.name if leader is not None and len(ranked) >= 2 else None,
        difference=difference, relative=relative, noise=parts.noise, call=parts.call,
        cost={a.name: a.cost for a in ranked}, fairness=parts.fairness,
        race={"target": parts.goal, "curve": "raw" if is_eval(parts.metric) else "smoothed",
              "crossings": {a.name: a.race.get("x") for a in ranked},
              "elapsed": {a.name: a.race.get("elapsed") for a in ranked}},
        axis_reason=parts.reason, run_values=_run_values(ranked, parts.metric))


def _run_values(ranked: list[_Arm], metric: str) -> dict[str, float]:
    values = [(name, v) for arm in ranked for name, v in zip(arm.runs, arm.members)]
    values.sort(key=lambda item: -item[1] if higher_is_better(metric) else item[1])
    return dict(values)


def _empty(text: str, axis: str, reason: str | None, fairness: list[str]) -> Verdict:
    return Verdict(text=text, metric=None, axis=axis, budget=None, values={}, leader=None,
                   difference=None, relative=None, noise=None, call="not-comparable",
                   fairness=fairness, axis_reason=reason)


def _axis(runs: Sequence[Run], x: str) -> tuple[str, str | None]:
    """The axis the verdict is decided on, and why steps (or samples) would mislead."""
    fair = propose_axis(runs)
    batches = {r.name: r.batch.global_batch.value for r in runs
               if r.batch.global_batch.value is not None}
    lengths = {r.name: r.batch.seq_len.value for r in runs if r.batch.seq_len.value is not None}
    reason = None
    if len(set(batches.values())) > 1:
        small, large = min(batches, key=batches.get), max(batches, key=batches.get)  # type: ignore[arg-type]
        listed = listing([f"{name} {size:,}" for name, size in batches.items()])
        reason = (f"the global batches differ ({listed} sequences per step), so a step of "
                  f"{large} holds {batches[large] / batches[small]:.3g}× the data of a step of "
                  f"{small} and a comparison on steps would mislead")
    if x == "samples" and len(set(lengths.values())) > 1 and fair == "tokens":
        return "tokens", ("the sequence lengths differ, so a sample is not the same amount "
                          "of text in every run and a comparison on samples would mislead")
    if x in _STEP_AXES and (reason or _units_differ(runs)) and fair != "step":
        return fair, reason or "the runs count steps differently, so steps would mislead"
    return x, reason


def _units_differ(runs: Sequence[Run]) -> bool:
    units = {run.step_unit for run in runs}
    return len(units) > 1 or "log_call" in units


def _curve(runs: Sequence[Run], axis: str, x: str, smoothing: Smoothing | None) -> Smoothing:
    """The smoothed curve on ``axis``: the given smoothing (a share of the range resolved on
    it; a half-life in units of another axis replaced by the default), else an EMA whose
    half-life is 2% of the range (what the report draws)."""
    if smoothing is not None and (smoothing.kind == "tb" or smoothing.fraction is not None
                                  or axis == x):
        return smoothing.resolved(_span(runs, axis))
    return Smoothing("x", 0.0, 0.02).resolved(_span(runs, axis) or 1.0)


def _span(runs: Sequence[Run], axis: str) -> float:
    xs = pl.concat([r.scalars.get_column(axis).cast(pl.Float64) for r in runs])
    span = (xs.max() or 0.0) - (xs.min() or 0.0)  # type: ignore[operator]
    return float(span)


def _arms(groups: Mapping[str, Sequence[str]], names: list[str]) -> list[_Arm]:
    arms, grouped = [], set()
    for group, members in groups.items():
        present = [m for m in members if m in names]
        if present:
            arms.append(_Arm(group, present))
            grouped.update(present)
    return arms + [_Arm(name, [name]) for name in names if name not in grouped]


def _worst(series: Mapping[str, pl.DataFrame], metric: str) -> float | None:
    finals = [float(s.get_column("value")[-1]) for s in series.values()]
    finite = [v for v in finals if np.isfinite(v)]
    if not finite:
        return None
    return min(finite) if higher_is_better(metric) else max(finite)


def _measure(arm: _Arm, series: Mapping[str, pl.DataFrame], metric: str, budget: float,
             goal: float | None, curve: Smoothing | None) -> None:
    """The arm's value, scatter, crossing and cost: means over its runs."""
    column = "value" if is_eval(metric) else "smoothed"
    values, sigmas, races, costs, points, bends = [], [], [], [], [], []
    for frame in series.values():
        xs = frame.get_column("x").to_numpy()
        value = value_at(xs, frame.get_column(column).to_numpy(), budget)
        if value is None:
            return
        values.append(value)
        scatter = _scatter(frame, metric, budget, curve)
        if scatter is not None:
            sigmas.append(scatter[0])
            points.append(scatter[1])
            bends.append(scatter[2])
        position = crossing(frame.get_column("smoothed").to_numpy(), goal,
                            higher=higher_is_better(metric))
        races.append({"x": at_position(xs, position),
                      **{c: at_position(frame.get_column(c).to_numpy(), position)
                         for c in _COST_AXES}})
        costs.append({c: value_at(xs, frame.get_column(c).cast(pl.Float64).to_numpy(), budget)
                      for c in _COST_AXES})
    arm.value, arm.members = float(np.mean(values)), values
    if len(sigmas) == len(values):
        arm.sigma = float(np.sqrt(np.mean(np.square(sigmas)) / len(sigmas)))
        arm.scatter = {"points": min(points), "bend": any(bends)}
    arm.race = _mean_dicts(races)
    arm.cost = _mean_dicts(costs)


def _scatter(frame: pl.DataFrame, metric: str, budget: float,
             curve: Smoothing | None) -> tuple[float, int, bool] | None:
    xs, raw = frame.get_column("x").to_numpy(), frame.get_column("value").to_numpy()
    if is_eval(metric):
        found = eval_scatter(xs, raw, budget)
        return None if found is None else (found.sigma, found.points, found.bend)
    found = train_scatter(xs, raw, budget)
    if found is None:
        return None
    return found.sigma * smoothing_factor(xs, curve, budget), found.points, False


def _mean_dicts(items: list[dict[str, float | None]]) -> dict[str, float | None]:
    """Key by key, the mean over runs; None unless every run has the number."""
    keys = items[0].keys() if items else ()
    return {k: None if any(i[k] is None for i in items)
            else float(np.mean([i[k] for i in items])) for k in keys}  # type: ignore[misc]


def _call(ranked: list[_Arm], metric: str) -> tuple[dict[str, Any] | None, str]:
    """The noise estimate behind the call, and the call (before the fairness check)."""
    if len(ranked) < 2:
        return None, "not-comparable"
    leader, runner = ranked[0], ranked[1]
    difference = abs(leader.value - runner.value)  # type: ignore[operator]
    if len(leader.members) >= 2 and len(runner.members) >= 2:
        _diff, low, high, df = welch(np.array(leader.members), np.array(runner.members))  # type: ignore[misc]
        sign = 1 if higher_is_better(metric) else -1  # leader's advantage as a positive number
        lo, hi = sorted((sign * low, sign * high))
        noise = {"kind": "seeds", "interval": [lo, hi], "df": df,
                 "n": {leader.name: len(leader.members), runner.name: len(runner.members)},
                 "half_width": (hi - lo) / 2}
        return noise, "clear" if lo > 0 else "within-noise"
    if leader.sigma is None or runner.sigma is None:
        return {"kind": "unknown", "half_width": None}, "within-noise"
    band = Z95 * float(np.hypot(leader.sigma, runner.sigma))
    noise = {"kind": "eval-scatter" if is_eval(metric) else "train-scatter",
             "half_width": band, "sigma": {leader.name: leader.sigma, runner.name: runner.sigma},
             "points": {a.name: a.scatter.get("points") for a in (leader, runner)},
             "bend": bool(leader.scatter.get("bend") or runner.scatter.get("bend"))}
    return noise, "clear" if difference > band else "within-noise"


def _breaks(findings: Sequence[Finding], axis: str, metric: str) -> bool:
    for finding in findings:
        if finding.level == "info":
            continue
        axes = _BREAKING.get(finding.code)
        if axes is not None and axis in axes:
            return True
        if finding.code == "loss-normalisation-changed" and not is_eval(metric):
            return True
    return False
