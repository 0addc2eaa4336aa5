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
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from ..audit import audit, propose_axis
from ..display import fmt, listing
from ..model import Finding, Run
from .crossing import at_position, crossing, value_at
from .fit import fit_noise, fit_width, local_fit, metric_value, run_curve
from .headline import headline, key_numbers
from .kinds import is_eval
from .noise import SETTLE_SEEDS, Z95, eval_scatter, seed_sd_to_settle, welch
from .schedule import Position, describe, equal_fraction, position, schedule_finding, x_at_step
from .smooth import Smoothing
from .summary import higher_is_better, series_of
from .wording import AXIS_QUESTIONS, compose, fairness_phrases

__all__ = ["CALLS", "Verdict", "decide"]

CALLS = ("clear", "unreplicated", "within-noise", "not-comparable")
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
    #: when the runs stand at different points of their learning-rate schedules at the
    #: budget: each run's position, and the comparison to read instead (:mod:`.schedule`)
    schedule: dict[str, Any] | None = None
    #: the verdict at a glance (:mod:`.headline`): one sentence, and the key numbers
    headline: str = ""
    key_numbers: list[dict[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        return self.text

    def to_dict(self) -> dict[str, Any]:
        """The ``verdict`` object of ``runcompare RUN... --json`` (docs/architecture.md's contracts)."""
        return {"text": self.text, "metric": self.metric, "axis": self.axis,
                "budget": self.budget, "values": self.values, "leader": self.leader,
                "difference": self.difference, "relative": self.relative, "noise": self.noise,
                "call": self.call, "cost": self.cost, "race": self.race,
                "fairness": self.fairness, "axis_reason": self.axis_reason,
                "schedule": self.schedule, "headline": self.headline,
                "key_numbers": self.key_numbers}


@dataclass
class _Arm:
    name: str
    runs: list[str]
    value: float | None = None
    members: list[float] = field(default_factory=list)
    sigma: float | None = None
    scatter: dict[str, Any] = field(default_factory=dict)
    race: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, float | None] = field(default_factory=dict)
    #: each run's crossing of the target on x (None: not reached)
    crossings: list[float | None] = field(default_factory=list)


def decide(runs: Sequence[Run], *, x: str, metric: str | None, target: float | None,
           groups: Mapping[str, Sequence[str]], smoothing: Smoothing | None,
           findings: Sequence[Finding] = (), auto_groups: bool = False,
           note: str | None = None) -> Verdict:
    """The verdict on ``metric`` for ``runs`` compared on ``x`` (see the module docstring).

    ``smoothing`` is the comparison's smoothing as given (a share of the range is resolved on
    the verdict's axis); ``findings`` are the runs' own findings; ``auto_groups`` says the
    groups were found automatically (the verdict says so, and how to switch them off);
    ``note`` is a sentence on the choice of ``metric`` said right after the lead.
    """
    axis, reason = _axis(runs, x)
    audited = audit(runs, x=axis) + [f for f in findings if f.run is not None]
    fairness = fairness_phrases(audited, axis=axis, metric=metric)
    if metric is None:
        return _empty("The runs share no metric to compare.", axis, reason, fairness)
    curve = _curve(runs, axis, x, smoothing)
    found = {run.name: series for run, series in zip(runs, series_of(
        runs, metric, axis, None if is_eval(metric) else curve))}
    series = {name: s for name, s in found.items() if s is not None and s.height}
    if not series:
        return _empty(f"No run logged {metric} on {axis}.", axis, reason, fairness)
    budget = min(float(s.get_column("x")[-1]) for s in series.values())
    start = max(float(s.get_column("x")[0]) for s in series.values())
    missing = [run.name for run in runs if run.name not in series]
    if len(series) > 1 and budget <= start:
        question = AXIS_QUESTIONS.get(axis, axis)
        said = " ".join(n for n in (_apart(series, axis), _left_out(missing, metric, axis),
                                    f"Compared on {axis} ({question}).") if n)
        return _empty(said, axis, reason, fairness, metric)
    arms = _arms(groups, list(series))
    width = fit_width(curve, [s.get_column("x").to_numpy() for s in series.values()])
    curves = _curves(runs, series, metric, axis, width)
    goal = target if target is not None else _worst(curves, metric)
    for arm in arms:
        _measure(arm, {name: series[name] for name in arm.runs}, curves, metric, budget, goal,
                 width)
    valued = [(a, a.value) for a in arms if a.value is not None]
    ranked = [a for a, _ in sorted(valued, key=lambda item: -item[1] if higher_is_better(metric)
                                   else item[1])]
    noise, call = _call(ranked, metric)
    positions = [position(run, axis, budget) for run in runs if run.name in series]
    shifted = schedule_finding([r for r in runs if r.name in series], positions)
    schedule = None
    if shifted is not None and len(ranked) >= 2:
        fairness = [shifted.message[0].upper() + shifted.message[1:]] + fairness
        schedule = _schedule(positions, ranked, [r for r in runs if r.name in series], series,
                             metric, axis, width)
    if len(ranked) < 2 or _breaks(audited, axis, metric) or schedule is not None:
        call = "not-comparable"
    note = " ".join(n for n in (note, _left_out(missing, metric, axis)) if n) or None
    parts = _Parts(metric=metric, axis=axis, budget=budget, ranked=ranked, goal=goal,
                   target_given=target is not None, noise=noise, call=call, reason=reason,
                   fairness=fairness, runs=list(runs), curve=curve,
                   speedup=race_speedup(ranked),
                   groups={a.name: a.runs for a in ranked if len(a.runs) > 1},
                   auto_groups=auto_groups, schedule=schedule, note=note)
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
    speedup: dict[str, Any] | None = None
    groups: dict[str, list[str]] = field(default_factory=dict)
    auto_groups: bool = False
    schedule: dict[str, Any] | None = None
    note: str | None = None


def _verdict(parts: _Parts) -> Verdict:
    verdict = _numbers(parts)
    return replace(verdict, headline=headline(verdict), key_numbers=key_numbers(verdict))


def _numbers(parts: _Parts) -> Verdict:
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
        race={"target": parts.goal, "curve": "raw" if is_eval(parts.metric) else "local-fit",
              "crossings": {a.name: a.race.get("x") for a in ranked},
              "elapsed": {a.name: a.race.get("elapsed") for a in ranked},
              "before_first": [a.name for a in ranked if a.race.get("before_first")],
              "speedup": parts.speedup},
        axis_reason=parts.reason, run_values=_run_values(ranked, parts.metric),
        schedule=parts.schedule)


def _run_values(ranked: list[_Arm], metric: str) -> dict[str, float]:
    values = [(name, v) for arm in ranked for name, v in zip(arm.runs, arm.members)]
    values.sort(key=lambda item: -item[1] if higher_is_better(metric) else item[1])
    return dict(values)


def _empty(text: str, axis: str, reason: str | None, fairness: list[str],
           metric: str | None = None) -> Verdict:
    verdict = _bare(text, axis, reason, fairness, metric)
    return replace(verdict, headline=headline(verdict))


def _bare(text: str, axis: str, reason: str | None, fairness: list[str],
          metric: str | None) -> Verdict:
    return Verdict(text=text, metric=metric, axis=axis, budget=None, values={}, leader=None,
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
    span = float(xs.max() or 0.0) - float(xs.min() or 0.0)
    return span


def _arms(groups: Mapping[str, Sequence[str]], names: list[str]) -> list[_Arm]:
    arms, grouped = [], set()
    for group, members in groups.items():
        present = [m for m in members if m in names]
        if present:
            arms.append(_Arm(group, present))
            grouped.update(present)
    return arms + [_Arm(name, [name]) for name in names if name not in grouped]


def _curves(runs: Sequence[Run], series: Mapping[str, pl.DataFrame], metric: str, axis: str,
            width: float) -> dict[str, np.ndarray]:
    """Each run's curve its crossings are read off (:func:`.fit.run_curve`)."""
    by_name = {run.name: run for run in runs}
    return {name: run_curve(by_name[name], frame, metric, axis, width)
            for name, frame in series.items()}


def _worst(curves: Mapping[str, np.ndarray], metric: str) -> float | None:
    """The worst of the runs' last values on their curves: a target every run reaches."""
    finals = []
    for values in curves.values():
        finite = values[np.isfinite(values)]
        if finite.size:
            finals.append(float(finite[-1]))
    if not finals:
        return None
    return min(finals) if higher_is_better(metric) else max(finals)


def _measure(arm: _Arm, series: Mapping[str, pl.DataFrame], curves: Mapping[str, np.ndarray],
             metric: str, budget: float, goal: float | None, width: float) -> None:
    """The arm's value, scatter, crossing and cost: means over its runs."""
    values, noises, races, costs = [], [], [], []
    for name, frame in series.items():
        xs, raw = frame.get_column("x").to_numpy(), frame.get_column("value").to_numpy()
        value = metric_value(xs, raw, metric, budget, width)
        if value is None:
            return
        values.append(value)
        noises.append(_scatter(xs, raw, metric, budget, width))
        races.append(_race_of(frame, curves[name], goal, metric, noises[-1], width))
        costs.append({c: value_at(xs, frame.get_column(c).cast(pl.Float64).to_numpy(), budget)
                      for c in _COST_AXES})
    arm.value, arm.members = float(np.mean(values)), values
    known = [n for n in noises if n is not None]
    if len(known) == len(noises):
        sigmas = [n["sigma"] for n in known]
        arm.sigma = float(np.sqrt(np.mean(np.square(sigmas)) / len(sigmas)))
        arm.scatter = {"points": min(n["points"] for n in known),
                       "bend": any(n.get("bend") for n in known),
                       "rho": max(n.get("rho", 0.0) for n in known),
                       "effective": min(n.get("effective", n["points"]) for n in known)}
    arm.crossings = [r.get("x") for r in races]
    arm.race = _mean_dicts([{k: r.get(k) for k in ("x", *_COST_AXES)} for r in races])
    arm.race["before_first"] = any(r.get("before_first") for r in races)
    arm.race["spread"] = _race_spread(races)
    arm.cost = _mean_dicts(costs)


def _schedule(positions: list[Position], ranked: list[_Arm], runs: list[Run],
              series: Mapping[str, pl.DataFrame], metric: str, axis: str,
              width: float) -> dict[str, Any]:
    """The runs' schedule positions at the budget and the comparison to read instead: each
    arm at the same fraction of its runs' schedules (:func:`.schedule.equal_fraction`)."""
    told = {p.run: {"step": p.step, "decayed": p.decayed, "fraction": p.fraction,
                    "length": p.length, "source": p.source} for p in positions}
    out: dict[str, Any] = {"positions": told, "instead": None}
    equal = equal_fraction(positions, runs)
    if equal is None:
        return out
    share, steps = equal
    by_name = {run.name: run for run in runs}
    values: dict[str, float] = {}
    for arm in ranked:
        found = []
        for name in arm.runs:
            x = x_at_step(by_name[name], axis, steps[name])
            frame = series[name]
            xs, raw = frame.get_column("x").to_numpy(), frame.get_column("value").to_numpy()
            found.append(None if x is None else metric_value(xs, raw, metric, x, width))
        if found and all(v is not None for v in found):
            values[arm.name] = float(np.mean(found))  # type: ignore[arg-type]
    order = sorted(values, key=lambda n: -values[n] if higher_is_better(metric) else values[n])
    out["instead"] = {"share": share, "where": describe(share), "steps": steps,
                      "values": {n: values[n] for n in order},
                      "leader": order[0] if len(order) >= 2 else None}
    return out


def _scatter(xs: np.ndarray, raw: np.ndarray, metric: str, budget: float,
             width: float) -> dict[str, Any] | None:
    """One run's noise at the budget: the eval scatter, or the fit's noise with the points'
    autocorrelation."""
    if is_eval(metric):
        found = eval_scatter(xs, raw, budget)
        return None if found is None else {"sigma": found.sigma, "points": found.points,
                                           "bend": found.bend}
    noise = fit_noise(xs, raw, budget, width, budget)
    return None if noise is None else {"sigma": noise.sigma, "points": noise.points,
                                       "rho": noise.rho, "effective": noise.effective,
                                       "point": noise.point}


def _race_of(frame: pl.DataFrame, curve: np.ndarray, goal: float | None, metric: str,
             noise: dict[str, Any] | None, width: float) -> dict[str, Any]:
    """Where one run's curve crosses ``goal`` on x and the cost axes, whether that was at or
    before its first point (no measured crossing), and the crossing's standard deviation on x
    (the curve's noise there over its slope)."""
    xs = frame.get_column("x").to_numpy()
    position = crossing(curve, goal, higher=higher_is_better(metric))
    race: dict[str, Any] = {"x": at_position(xs, position),
                            **{c: at_position(frame.get_column(c).to_numpy(), position)
                               for c in _COST_AXES}}
    race["before_first"] = position == 0.0
    race["sd"] = None
    if position is None or position == 0.0 or noise is None or race["x"] is None:
        return race
    x = float(race["x"])
    step = max(width, float(np.median(np.diff(xs))) if xs.size > 1 else 0.0)
    lo, hi = max(x - step, float(xs[0])), min(x + step, float(xs[-1]))
    if hi <= lo:
        return race
    raw = frame.get_column("value").to_numpy()
    ends = local_fit(xs, raw, np.array([lo, hi]), width) if not is_eval(metric) \
        else np.interp([lo, hi], xs, curve)
    slope = float(ends[1] - ends[0]) / (hi - lo)
    if is_eval(metric):
        sigma: float | None = noise["sigma"]
    else:
        found = fit_noise(xs, raw, x, width, float(xs[-1]))
        sigma = found.sigma if found is not None else None
    if sigma is not None and slope != 0 and np.isfinite(slope):
        race["sd"] = sigma / abs(slope)
    return race


def _race_spread(races: list[dict[str, Any]]) -> float | None:
    """The standard deviation of log x at the crossing of one run (single runs: from its
    noise), None when unknown."""
    if len(races) != 1:
        return None
    x, sd = races[0].get("x"), races[0].get("sd")
    return sd / x if x and sd is not None else None


def _mean_dicts(items: list[dict[str, float | None]]) -> dict[str, Any]:
    """Key by key, the mean over runs; None unless every run has the number."""
    keys = items[0].keys() if items else ()
    return {k: None if any(i[k] is None for i in items)
            else float(np.mean([i[k] for i in items])) for k in keys}


def _call(ranked: list[_Arm], metric: str) -> tuple[dict[str, Any] | None, str]:
    """The noise estimate behind the call, and the call (before the fairness check).

    Two or more seeds in both arms: Welch's interval, ``clear`` when it excludes zero. Else
    the runs' own noise at the budget: a margin beyond it is ``unreplicated`` (ahead beyond
    the runs' scatter, the seed-to-seed variation unknown), never ``clear``.
    """
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
    settle = {str(n): seed_sd_to_settle(difference, n) for n in SETTLE_SEEDS}
    if leader.sigma is None or runner.sigma is None:
        return {"kind": "unknown", "half_width": None, "settle": settle}, "within-noise"
    band = Z95 * float(np.hypot(leader.sigma, runner.sigma))
    noise = {"kind": "eval-scatter" if is_eval(metric) else "train-fit",
             "half_width": band, "sigma": {leader.name: leader.sigma, runner.name: runner.sigma},
             "points": {a.name: a.scatter.get("points") for a in (leader, runner)},
             "bend": bool(leader.scatter.get("bend") or runner.scatter.get("bend")),
             "settle": settle}
    if not is_eval(metric):
        noise["rho"] = {a.name: a.scatter.get("rho") for a in (leader, runner)}
        noise["effective"] = {a.name: a.scatter.get("effective") for a in (leader, runner)}
    return noise, "unreplicated" if difference > band else "within-noise"


def _left_out(missing: list[str], metric: str, axis: str) -> str | None:
    """The runs the verdict leaves out, said (never silently)."""
    if not missing:
        return None
    return (f"{listing(missing)} logged no {metric} on {axis} and {'is' if len(missing) == 1 else 'are'} "
            "left out of this verdict.")


def _apart(series: Mapping[str, pl.DataFrame], axis: str) -> str:
    """Why runs that share no stretch of the axis get no call."""
    spans = [f"{name} {fmt(float(s.get_column('x')[0]))} to {fmt(float(s.get_column('x')[-1]))}"
             for name, s in series.items()]
    return (f"The runs share no stretch of {axis} ({listing(spans)}), so no value is compared "
            "at a common budget: they are not comparable as they stand.")


def race_speedup(ranked: list[_Arm]) -> dict[str, Any] | None:
    """How much sooner the faster of the two leading arms crossed the target, on x: the ratio
    of their mean crossings, with a 95% interval and a call. Seed groups: Welch's interval of
    the difference of their mean log crossings (``clear`` when it excludes zero). Single runs:
    each crossing's own noise on log x (``unreplicated`` beyond it, never ``clear``). None when
    either arm has no measured crossing (not reached, or at or before its first point)."""
    if len(ranked) < 2:
        return None
    a, b = ranked[0], ranked[1]
    if any(arm.race.get("before_first") or not arm.crossings
           or any(not c for c in arm.crossings) for arm in (a, b)):
        return None
    (fast, slow) = sorted((a, b), key=lambda arm: arm.race["x"])
    ratio = slow.race["x"] / fast.race["x"]
    out: dict[str, Any] = {"faster": fast.name, "slower": slow.name, "value": ratio,
                           "interval": None, "call": None}
    logs = [np.log(np.array(arm.crossings, dtype=float)) for arm in (slow, fast)]
    if len(logs[0]) >= 2 and len(logs[1]) >= 2:
        _d, low, high, _df = welch(*logs)  # type: ignore[misc]
        out["interval"] = [float(np.exp(low)), float(np.exp(high))]
        out["call"] = "clear" if low > 0 or high < 0 else "within-noise"
        return out
    spreads = [arm.race.get("spread") for arm in (a, b)]
    if len(a.crossings) == len(b.crossings) == 1 and all(s is not None for s in spreads):
        half = Z95 * float(np.hypot(*spreads))  # type: ignore[arg-type]
        out["interval"] = [float(ratio * np.exp(-half)), float(ratio * np.exp(half))]
        out["call"] = "unreplicated" if np.log(ratio) > half else "within-noise"
    return out


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
