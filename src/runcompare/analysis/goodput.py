"""Where a run's wall-clock went: training, evaluation, checkpointing, restarts, unexplained.

The wall-clock is from the run's first timed point to its last (what happened before the first
logged point, process start and model loading, is not in the logs). It is cut into intervals
between consecutive logged training points (the training loss, else the most-logged training
metric), and a tail after the last one (end-of-run eval and save); each interval of Δs steps
and d seconds is split:

- evaluation: the eval runtimes logged inside it (HF's ``eval/runtime``); without them, the
  time above the training pace of an interval holding an eval point (read off timestamps);
- the training pace p: the median seconds per step of the intervals with nothing else in them;
- restarts: an interval whose ends lie in different legs (a crash and a resume) holds
  d − eval − Δs·p of restart, split into the lost work (the earlier leg's time after its last
  point that survived, redone by the next leg) and the downtime (the rest: the gap between the
  legs and the new leg's start-up). When that last point is a save step, the checkpoint the
  next leg resumed from was written after it: the lost work is then the steps the earlier leg
  logged past the save at the training pace, and the rest of its time after the save is
  checkpointing, not lost;
- checkpointing: an interval holding a save step (multiples of ``save_steps``) holds
  d − eval − Δs·p of checkpointing;
- unexplained: any other interval more than twice its pace holds the time above Δs·p;
- training: the rest.

Rates: tokens (else samples) per second of training time, per device with the world size;
over time, per interval: the training rate (evaluation, checkpointing and restarts taken out)
and the rate as measured (the whole interval). The ETA to a token budget is budget ÷ training
rate (ideal) and that ÷ the productive fraction (at the run's own goodput).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ..errors import InputError, MissingInfoError
from ..model import Finding, Run

__all__ = ["CATEGORIES", "Goodput", "goodput", "parse_budget"]

CATEGORIES = ("training", "evaluation", "checkpointing", "restarts", "unexplained")
#: An interval slower than this many times its training pace, with nothing logged to explain
#: it, counts the excess as unexplained.
_STALL = 2.0
_SUFFIX = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


@dataclass
class Goodput:
    """One run's wall-clock by category (seconds), its restarts, rates and an optional ETA."""

    run: str
    wall_seconds: float
    seconds: dict[str, float]
    restarts: list[dict[str, Any]]
    axis: str
    rate: float | None
    world_size: int | None
    done: float | None
    timeline: pl.DataFrame
    #: The training pace: median seconds per optimizer step of the intervals with nothing
    #: else in them.
    pace: float = 0.0
    budget: float | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def productive_fraction(self) -> float:
        return self.seconds["training"] / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def rate_per_device(self) -> float | None:
        if self.rate is None or not self.world_size:
            return None
        return self.rate / self.world_size

    def eta(self) -> dict[str, float | None] | None:
        """Hours to the budget (whole and what remains), ideal and at this run's goodput."""
        if self.budget is None or not self.rate:
            return None
        ideal = self.budget / self.rate / 3600  # hours at the training rate
        left = max(self.budget - (self.done or 0.0), 0.0) / self.rate / 3600
        fraction = self.productive_fraction
        return {"hours_ideal": ideal,
                "hours_at_goodput": ideal / fraction if fraction else None,
                "remaining_hours_ideal": left,
                "remaining_hours_at_goodput": left / fraction if fraction else None}

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "wall_seconds": self.wall_seconds, "seconds": self.seconds,
                "productive_fraction": self.productive_fraction, "restarts": self.restarts,
                "axis": self.axis, "rate_per_second": self.rate,
                "rate_per_second_per_device": self.rate_per_device,
                "world_size": self.world_size, "done": self.done,
                "seconds_per_step": self.pace, "budget": self.budget,
                "eta": self.eta(), "timeline": self.timeline.to_dicts(),
                "findings": [f.to_json() for f in self.findings]}


def parse_budget(text: str | float | None, *, option: str = "--budget") -> float | None:
    """A positive amount such as ``100B``, ``1.5T``, ``1.2M`` or ``1e11`` (tokens, tokens/s).

    >>> parse_budget("100B"), parse_budget("2.5M"), parse_budget(None)
    (100000000000.0, 2500000.0, None)
    """
    if text is None:
        return None
    raw = str(text).strip().replace(",", "").replace("_", "")
    unit = raw[-1:] if raw[-1:] in _SUFFIX and raw[-1:] else ""
    try:
        value = float(raw[:-1] if unit else raw) * _SUFFIX[unit]
    except ValueError:
        raise InputError(f"{option} {text!r}: expected a number such as 100B, 1.2M, 1.5T or "
                         "5e9") from None
    if not 0 < value < float("inf"):
        raise InputError(f"{option} {text!r}: must be a positive number")
    return value


def goodput(run: Run, *, budget: float | str | None = None) -> Goodput:
    """Split ``run``'s wall-clock into :data:`CATEGORIES` and measure its rate (see the module)."""
    points = _train_points(run)
    axis = "tokens" if points.get_column("tokens").null_count() == 0 else "samples"
    wanted = parse_budget(budget)
    if wanted is not None and axis != "tokens":
        raise MissingInfoError(f"run {run.name!r} has no tokens axis for a token budget; pass "
                               f"--set {run.name}:seq_len=N")
    evals = _evals(run)
    saves = _save_steps(run)
    steps = points.get_column("step").to_numpy()
    wall = points.get_column("wall_time").to_numpy()
    leg = _leg_of(run, wall)
    d, ds = np.diff(wall), np.diff(steps).astype(float)
    eval_in = _eval_seconds(evals, wall)
    has_eval = _has_eval(evals, wall)
    crosses = leg[1:] != leg[:-1]
    saved = np.array([any(a <= s < b for s in saves) for a, b in itertools.pairwise(steps)],
                     dtype=bool)
    clean = ~(crosses | saved | has_eval) & (ds > 0)
    pace = _pace(d, ds, clean, ~crosses & (ds > 0))
    parts = _split(d, ds, pace, eval_in, has_eval, crosses, saved)
    saved_lost = _saved_before_crash(run, steps, wall, leg, parts, eval_in, saves, pace)
    tail = _tail(run, wall[-1], evals, steps[-1] in saves or bool(saves and steps[-1] >= max(saves)))
    seconds = {c: float(parts[c].sum() + tail.get(c, 0.0)) for c in CATEGORIES}
    span = float(max(wall[-1] + sum(tail.values()), wall[-1]) - wall[0])
    axis_values = points.get_column(axis).cast(pl.Float64).to_numpy()
    rate = float(np.diff(axis_values)[ds > 0].sum() / parts["training"][ds > 0].sum()) \
        if (ds > 0).any() and parts["training"][ds > 0].sum() > 0 else None
    world = run.batch.world_size.value
    timeline = _timeline(wall, axis_values, d, parts, world)
    findings = _findings(run, evals, saves, world)
    return Goodput(run=run.name, wall_seconds=span, seconds=seconds,
                   restarts=_restarts(run, steps, wall, leg, parts, eval_in, saved_lost),
                   axis=axis, rate=rate, world_size=world, done=float(axis_values[-1]),
                   timeline=timeline, pace=pace, budget=wanted, findings=findings)


def _train_points(run: Run) -> pl.DataFrame:
    """One timed point per logged training step: step, wall_time, samples, tokens."""
    timed = run.scalars.filter(pl.col("wall_time").is_not_null(),
                               pl.col("metric").str.starts_with("train/"))
    if timed.is_empty():
        raise MissingInfoError(f"run {run.name!r} has no logged wall times; goodput needs "
                               "them (trainer_state.json has none; TensorBoard and W&B logs do)")
    counts = timed.group_by("metric").len().sort(["len", "metric"], descending=[True, False])
    metric = "train/loss" if "train/loss" in timed.get_column("metric") else counts.item(0, 0)
    points = (timed.filter(pl.col("metric") == metric).sort("step", maintain_order=True)
              .select("step", "wall_time", "samples", "tokens"))
    if points.height < 3:
        raise InputError(f"run {run.name!r} has {points.height} timed {metric} points; goodput "
                         "needs at least 3")
    if points.get_column("samples").null_count():
        raise MissingInfoError(f"run {run.name!r} cannot be put on the samples axis; pass --set "
                               f"{run.name}:global_batch=N")
    return points


def _evals(run: Run) -> pl.DataFrame:
    """wall_time and seconds (null when not logged) of each evaluation."""
    evals = run.scalars.filter(pl.col("wall_time").is_not_null(),
                               pl.col("metric").str.starts_with("eval/"))
    runtime = evals.filter(pl.col("metric") == "eval/runtime")
    if not runtime.is_empty():
        return runtime.select("wall_time", seconds=pl.col("value"))
    return (evals.group_by("step").agg(pl.col("wall_time").max())
            .select("wall_time", seconds=pl.lit(None, pl.Float64)))


def _save_steps(run: Run) -> list[int]:
    every = run.facts.get("save_steps")
    if every is None or every.value is None:
        return []
    return list(range(int(every.value), run.optimizer_steps + 1, int(every.value)))


def _leg_of(run: Run, wall: np.ndarray) -> np.ndarray:
    """The leg of each wall time: the last leg that started at or before it."""
    if not run.legs:
        return np.zeros(wall.size, dtype=np.int64)
    starts = np.array([leg.wall_start for leg in run.legs])
    return np.maximum(np.searchsorted(starts, wall, side="right") - 1, 0)


def _in_interval(evals: pl.DataFrame, wall: np.ndarray) -> np.ndarray:
    """For each eval, the interval (index into np.diff(wall)) its wall time falls in; -1 if
    none (before the first point or in the tail)."""
    times = evals.get_column("wall_time").to_numpy()
    index = np.searchsorted(wall, times, side="left") - 1
    return np.where((index >= 0) & (index < wall.size - 1), index, -1)


def _eval_seconds(evals: pl.DataFrame, wall: np.ndarray) -> np.ndarray:
    out = np.zeros(wall.size - 1)
    index = _in_interval(evals, wall)
    seconds = evals.get_column("seconds").fill_null(0.0).to_numpy()
    np.add.at(out, index[index >= 0], seconds[index >= 0])
    return out


def _has_eval(evals: pl.DataFrame, wall: np.ndarray) -> np.ndarray:
    out = np.zeros(wall.size - 1, dtype=bool)
    index = _in_interval(evals, wall)
    out[index[index >= 0]] = True
    return out


def _pace(d: np.ndarray, ds: np.ndarray, clean: np.ndarray, same_leg: np.ndarray) -> float:
    """Median seconds per step of the clean intervals (else of every same-leg interval)."""
    chosen = clean if clean.any() else same_leg
    if not chosen.any():
        raise InputError("no interval between two training points of one leg; goodput cannot "
                         "measure the training pace")
    return float(np.median(d[chosen] / ds[chosen]))


def _split(d: np.ndarray, ds: np.ndarray, pace: float, eval_in: np.ndarray,
           has_eval: np.ndarray, crosses: np.ndarray, saved: np.ndarray) -> dict[str, np.ndarray]:
    """Each interval's seconds by category (see the module)."""
    expected = ds * pace  # seconds the steps of the interval take at the training pace
    unmeasured = has_eval & (eval_in == 0)  # evals without runtimes: their excess is the eval
    evaluation = np.where(unmeasured, np.clip(d - expected, 0, None), np.minimum(eval_in, d))
    rest = d - evaluation
    excess = np.clip(rest - expected, 0, None)
    restarts = np.where(crosses, excess, 0.0)
    checkpointing = np.where(~crosses & saved, excess, 0.0)
    stalled = ~crosses & ~saved & ~unmeasured & (rest > _STALL * expected)
    unexplained = np.where(stalled, excess, 0.0)
    training = rest - restarts - checkpointing - unexplained
    return {"training": training, "evaluation": evaluation, "checkpointing": checkpointing,
            "restarts": restarts, "unexplained": unexplained}


def _tail(run: Run, last: float, evals: pl.DataFrame, saved: bool) -> dict[str, float]:
    """The time after the last training point (end-of-run evals, the final save)."""
    end = run.scalars.get_column("wall_time").max()
    if end is None or not float(end) > last:  # type: ignore[arg-type]
        return {}
    span = float(end) - last  # type: ignore[arg-type]
    late = evals.filter(pl.col("wall_time") > last).get_column("seconds")
    evaluation = min(float(late.fill_null(0.0).sum()), span)
    if late.len() and late.null_count() == late.len():
        evaluation = span
    rest = span - evaluation
    return {"evaluation": evaluation, "checkpointing" if saved else "unexplained": rest}


def _saved_before_crash(run: Run, steps: np.ndarray, wall: np.ndarray, leg: np.ndarray,
                        parts: dict[str, np.ndarray], eval_in: np.ndarray, saves: list[int],
                        pace: float) -> dict[int, float]:
    """Move the checkpoint written at a leg's last surviving point from its restart seconds to
    checkpointing: only the steps logged past it were lost (see the module). Returns the lost
    work of each such interval."""
    out = {}
    for i in np.flatnonzero(leg[1:] != leg[:-1]):
        if int(steps[i]) not in saves:
            continue
        before = run.legs[int(leg[i])]
        after = max(min(before.wall_end - wall[i] - eval_in[i], float(parts["restarts"][i])),
                    0.0)
        lost = min(after, pace * max(before.last_step - int(steps[i]), 0))
        parts["restarts"][i] -= after - lost
        parts["checkpointing"][i] += after - lost
        out[int(i)] = lost
    return out


def _restarts(run: Run, steps: np.ndarray, wall: np.ndarray, leg: np.ndarray,
              parts: dict[str, np.ndarray], eval_in: np.ndarray,
              saved_lost: dict[int, float]) -> list[dict[str, Any]]:
    """Each leg boundary: the steps around it, its restart seconds, lost work (the earlier
    leg's time after its last kept point, its evaluations there counted as evaluation; after a
    save there, the steps it logged past it: ``saved_lost``) and downtime."""
    out = []
    for i in np.flatnonzero(leg[1:] != leg[:-1]):
        before = run.legs[int(leg[i])]
        after = before.wall_end - wall[i] - eval_in[i]
        lost = max(min(after, float(parts["restarts"][i])), 0.0)
        lost = saved_lost.get(int(i), lost)
        out.append({"last_step_kept": int(steps[i]), "resumed_at_step": int(steps[i + 1]),
                    "seconds": float(parts["restarts"][i]), "lost_work_seconds": lost,
                    "downtime_seconds": float(parts["restarts"][i]) - lost})
    return out


def _timeline(wall: np.ndarray, values: np.ndarray, d: np.ndarray,
              parts: dict[str, np.ndarray], world: int | None) -> pl.DataFrame:
    """Per interval: elapsed wall-clock at its end, the training rate and the measured rate
    (per device when the world size is known)."""
    done = np.diff(values)
    per = float(world) if world else 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        training = np.where(parts["training"] > 0, done / parts["training"] / per, np.nan)
        measured = np.where(d > 0, done / d / per, np.nan)
    return pl.DataFrame({"elapsed": wall[1:] - wall[0], "done": values[1:],
                         "training_rate": training, "measured_rate": measured}).fill_nan(None)


def _findings(run: Run, evals: pl.DataFrame, saves: list[int],
              world: int | None) -> list[Finding]:
    out = [Finding("info", "goodput-window",
                   "the wall-clock runs from the first timed point to the last; start-up before "
                   "the first logged point is not in the logs", run.name)]
    if not saves:
        out.append(Finding("info", "save-steps-unknown",
                           "the save interval is unknown (no save_steps); time spent "
                           "checkpointing counts as unexplained (--set save_steps=N)", run.name))
    if not evals.is_empty() and evals.get_column("seconds").null_count():
        out.append(Finding("info", "eval-runtime-unknown",
                           "evaluations logged no runtime; their time is read off the "
                           "timestamps", run.name))
    if not world:
        out.append(Finding("info", "world-size-unknown",
                           f"the world size is unknown, so rates are not per device (--set "
                           f"{run.name}:world_size=N)", run.name))
    return out
