"""The verdict in words: a few sentences, the same in the terminal, the report and the JSON.

In order: who is ahead at the budget and by how much, then whether that margin is beyond the
noise (a margin within it is called a tie, in those words); how the noise was measured and the call; the race
to the target (crossings and speedups, on the axis and in wall-clock); what it cost
(wall-clock, device-time and FLOPs to the budget, with where the numbers come from); the axis
it was decided on, what that axis answers and why steps would mislead, and the audit's
warnings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..audit import AXIS_QUESTIONS
from ..display import fmt, listing
from ..model import Finding
from .kinds import is_eval
from .summary import higher_is_better

if TYPE_CHECKING:
    from .verdict import _Arm, _Parts

__all__ = ["AXIS_QUESTIONS", "at", "compose", "fairness_phrases", "flops", "percent", "ratio",
           "seconds"]

#: Arms past the runner-up the first sentence names (the rest as a count and a range).
_OTHERS = 4

#: The audit's warnings in a few words each (a finding's own message otherwise).
_PHRASES = {
    "lr-not-rescaled": "every run kept the same peak learning rate although the global "
                       "batches differ, which may favour the smaller batch",
    "loss-normalisation-changed": "some runs trained before transformers 4.46 changed how the "
                                  "loss is normalised under gradient accumulation, so their "
                                  "training losses are not comparable",
    "padding-counted-as-tokens": "a token counter includes padding, which overstates tokens",
    "token-sources-differ": "some runs' tokens are a logged counter and others' are steps × "
                            "global batch × sequence length, which count different things "
                            "with padding or packing",
    "step-unit-mismatch": "the runs count steps differently",
    "global-batch-mismatch": "the global batches differ on a step axis",
    "seq-len-mismatch": "the sequence lengths differ",
    "damaged-input": "a log was damaged and read only up to the damage",
    "accum-overshoot": "the micro-batch overshoots the stated global batch",
    "batch-mismatch": "the stated global batch disagrees with its factors",
    "fact-conflict": "two sources disagree on a fact",
    "source-unreadable": "a source of the run could not be read",
    # a run's own warnings, which name its file: in a sweep many runs share one
    "stdout-buffered": "stdout was block-buffered, so the steps of the Trainer's logged dicts "
                       "were counted with logging_steps",
    "step-is-log-call": "the W&B step counts wandb.log() calls, not optimizer steps",
    "step-metric-unusable": "the declared W&B step metric could not be used, so _step was",
    "passed-over": "entries under the run's folder could not be read and were passed over",
    "overlong-lines": "over-long lines of a log were not read",
    "unparsed-lines": "lines of a log could not be fully parsed and were skipped in part",
    "no-step": "values logged before the first step were skipped",
    "mixed-runs": "checkpoints of another run were saved into the run's folder",
    "several-configs": "several Axolotl configs were found and the first was read",
    "hparam-conflict": "the run's sources disagree on hyperparameters",
    "panel-cut": "a W&B panel export stops at the web app's row limit",
    "deleted-run": "the MLflow run is deleted",
}


def fairness_phrases(findings: Sequence[Finding], *, axis: str, metric: str | None) -> list[str]:
    """The warnings among ``findings`` in words, each once (runs named where it is theirs,
    the first few of many)."""
    runs: dict[str, list[str]] = {}
    for finding in findings:
        if finding.level == "info":
            continue
        named = runs.setdefault(_PHRASES.get(finding.code, finding.message), [])
        if finding.run and finding.run not in named:
            named.append(finding.run)
    return [f"{listing(names, sep=' and ' if len(names) == 2 else ', ')}: {phrase}" if names
            else phrase for phrase, names in runs.items()]


def ratio(value: float) -> str:
    """A speedup or cost ratio.

    >>> ratio(1.0247), ratio(7.864), ratio(31.2)
    ('1.02×', '7.9×', '31×')
    """
    if value < 2:
        return f"{value:.2f}×"
    return f"{value:.1f}×" if value < 10 else f"{value:,.0f}×"


def seconds(value: float) -> str:
    """A duration as people read it.

    >>> seconds(8.504), seconds(66.877), seconds(754.0), seconds(86_400.0)
    ('8.5 s', '66.9 s', '12.6 min', '24 h')
    """
    if value < 100:
        return f"{value:.3g} s"
    return f"{value / 60:.3g} min" if value < 6000 else f"{value / 3600:.3g} h"


def flops(value: float) -> str:
    """A FLOP count in scientific notation.

    >>> flops(3.6451e10)
    '3.65e10'
    """
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _small(value: float) -> str:
    """A difference to two significant digits (four past a hundred).

    >>> _small(0.016712), _small(0.00049), _small(1234.5)
    ('0.017', '0.00049', '1,234')
    """
    return fmt(value) if abs(value) >= 100 else f"{value:.2g}"


def percent(share: float) -> str:
    """A share as a percentage, one decimal (two significant digits below 0.1%).

    >>> percent(0.00758), percent(0.000421), percent(0.31)
    ('0.8%', '0.042%', '31.0%')
    """
    return f"{share * 100:.1f}%" if share >= 0.001 else f"{share * 100:.2g}%"


def at(axis: str, value: float) -> str:
    """Where on an axis, as the start of a sentence.

    >>> at("tokens", 102_400.0), at("step", 30.0), at("device_hours", 0.0186)
    ('At 102,400 tokens', 'At step 30', 'At 0.0186 device-hours')
    """
    if axis == "flops":
        return f"At {flops(value)} training FLOPs"
    if axis == "elapsed":
        return f"After {seconds(value)} of wall-clock"
    phrases = {"step": "At step {}", "micro_step": "At micro-step {}", "epoch": "At epoch {}",
               "samples": "At {} samples", "tokens": "At {} tokens",
               "device_hours": "At {} device-hours"}
    return phrases.get(axis, f"At {axis} {{}}").format(fmt(value))


def compose(parts: _Parts) -> str:
    """The verdict's sentences (see the module docstring)."""
    sentences = [_level(parts), parts.note or "", _grouping(parts), _noise(parts), _race(parts),
                 _cost(parts), _fair(parts)]
    return " ".join(s.strip() for s in sentences if s.strip())


def _name(parts: _Parts) -> str:
    return parts.metric if is_eval(parts.metric) else f"{parts.metric} (local fit)"


def _level(parts: _Parts) -> str:
    ranked, where = parts.ranked, at(parts.axis, parts.budget)
    if not ranked:
        return f"{where} no run has a value of {parts.metric}."
    if len(ranked) == 1:
        return f"{where} only {ranked[0].name} has {_name(parts)}: {fmt(ranked[0].value)}."
    leader, runner = ranked[0], ranked[1]
    gap = abs(leader.value - runner.value)  # type: ignore[operator]
    way = "higher" if higher_is_better(parts.metric) else "lower"
    share = f" ({percent(gap / abs(runner.value))})" if runner.value else ""
    if len(ranked) > 2 + _OTHERS:
        rest = [a.value for a in ranked[2:]]
        return (f"{where} the best of {len(ranked)} on {_name(parts)} is {leader.name} with "
                f"{fmt(leader.value)}, {runner.name} next at {fmt(runner.value)} "
                f"({_small(gap)} behind); the other {len(rest)} span {fmt(rest[0])} to "
                f"{fmt(rest[-1])} ({way} is better).")
    others = "".join(f", {a.name} {fmt(a.value)}" for a in ranked[2:])
    if gap == 0:
        return (f"{where} {leader.name} and {runner.name} are level on {_name(parts)}: "
                f"{fmt(leader.value)} each{others}.")
    return (f"{where} {leader.name} is ahead on {_name(parts)} by {_small(gap)}{share}: "
            f"{fmt(leader.value)} against {runner.name}'s {fmt(runner.value)}{others} "
            f"({way} is better).")


def _grouping(parts: _Parts) -> str:
    """One sentence on the seed groups the arms are: which, and how they were made."""
    if not parts.groups:
        return ""
    sizes = [f"{name} ({len(runs)} runs)" for name, runs in parts.groups.items()]
    shown = listing(sizes[:_OTHERS]) + (f" and {len(sizes) - _OTHERS} more"
                                         if len(sizes) > _OTHERS else "")
    how = ("found automatically, runs whose facts agree but for the seed; --no-groups "
           "compares every run on its own" if parts.auto_groups else "as given by --group")
    return f"Each arm is the mean of a seed group: {shown} ({how})."


def _noise(parts: _Parts) -> str:
    noise, call = parts.noise or {}, parts.call
    if call == "not-comparable" and parts.schedule is not None:
        return _instead(parts)
    if call == "not-comparable":
        return ("No call is made: the runs are not comparable on this as it stands (see the "
                "caveats below)." if len(parts.ranked) >= 2 else "")
    kind = noise.get("kind")
    if kind == "seeds":
        low, high = noise["interval"]
        n = " and ".join(str(v) for v in noise["n"].values())
        where = "excludes" if call == "clear" else "includes"
        end = "a clear difference." if call == "clear" else "a tie within the seeds' spread."
        return (f"Across seeds the 95% interval of {parts.ranked[0].name}'s advantage is "
                f"{low:.3g} to {high:.3g} (Welch, n = {n} runs), which {where} "
                f"zero: {end}")
    settle = _settle(noise)
    if kind != "eval-scatter" and kind != "train-fit":
        return ("Whether that is more than noise cannot be told: too few points near the "
                f"budget to measure it. {settle}")
    band = f"±{_small(noise['half_width'])} at 95%, {_scatter_words(noise)}"
    if call == "unreplicated":
        return (f"That is beyond each run's own scatter ({band}) but unreplicated: one run "
                f"per arm cannot show the seed-to-seed variation, which often exceeds it. "
                f"{settle}")
    return (f"That margin is within the noise ({band}), so it is no real lead: call it a tie. "
            f"{settle}")


def _instead(parts: _Parts) -> str:
    """No call at the budget when the schedules' positions differ, and what to read instead."""
    text = ("No call is made at the budget: the runs stand at different points of their "
            "learning-rate schedules there, so the value favours the run that has annealed "
            "more.")
    instead = (parts.schedule or {}).get("instead")
    if not instead or len(instead["values"]) < 2:
        return text + " Compare the finals of runs that each completed their schedule."
    (lead, best), (runner, value) = list(instead["values"].items())[:2]
    steps = instead["steps"]
    named = [name for arm in parts.ranked for name in arm.runs if name in steps]
    if len(set(steps.values())) == 1:
        where = f"each at step {fmt(next(iter(steps.values())))}"
    else:
        where = listing([f"{name} at step {fmt(steps[name])}" for name in named])
    gap = abs(best - value)
    return (f"{text} Read instead {instead['where']} ({where}): {lead} {fmt(best)} against "
            f"{runner}'s {fmt(value)}, {lead} ahead by {_small(gap)}"
            + (f" ({percent(gap / abs(value))})" if value else "") + ".")


def _settle(noise: dict[str, Any]) -> str:
    """What would settle a single-run verdict: how many seeds, at what seed spread."""
    settle = noise.get("settle") or {}
    if not settle:
        return ""
    pieces = [f"{n} seeds" + (" of each would settle it if their spread (sd) is below "
                              if i == 0 else " if below ") + _small(sd)
              for i, (n, sd) in enumerate(settle.items()) if sd > 0]
    return f"{', '.join(pieces)}." if pieces else ""


def _scatter_words(noise: dict[str, Any]) -> str:
    if noise["kind"] == "train-fit":
        rho = max((r for r in noise.get("rho", {}).values() if r is not None), default=0.0)
        worth = min((e for e in noise.get("effective", {}).values() if e is not None),
                    default=None)
        words = "the scatter of each run's raw points around its local fit"
        if rho > 0.05 and worth is not None:
            words += (f", whose neighbouring points move together (lag-1 correlation "
                      f"{rho:.2f}: the fit is worth {worth:.3g} independent points)")
        return words
    fewest = min(p for p in noise["points"].values() if p is not None)
    words = f"the step-to-step scatter of each run's last {fewest} evals"
    if noise.get("bend"):
        words += (", which with evals this sparse includes the curve's own bend and so "
                  "overstates the noise")
    return words


def _race(parts: _Parts) -> str:
    if parts.goal is None or len(parts.ranked) < 2:
        return ""
    sign = "≥" if higher_is_better(parts.metric) else "≤"
    why = "the target" if parts.target_given else "the worst final value, which every run reaches"
    how = "between raw evals" if is_eval(parts.metric) else "on the local fit of the raw points"
    shown = parts.ranked if len(parts.ranked) <= 2 + _OTHERS else parts.ranked[:2]
    told = listing([_crossing_words(parts.axis, a) for a in shown])
    if len(shown) < len(parts.ranked):
        reached = sum(a.race.get("x") is not None for a in parts.ranked[2:])
        told += (f" (the other {len(parts.ranked) - 2}: {reached} reached it; the summary "
                 "table has each)")
    text = (f"Race to {parts.metric} {sign} {fmt(parts.goal)} ({why}; crossings interpolated "
            f"{how}): {told}")
    return text + _speedups(parts) + "."


def _crossing_words(axis: str, arm: _Arm) -> str:
    x = arm.race.get("x")
    if x is None:
        return f"{arm.name} not by its last point"
    if arm.race.get("before_first"):
        return f"{arm.name} at or before its first log ({_unit(axis, x)})"
    return f"{arm.name} at {_unit(axis, x)}"


def _unit(axis: str, value: float) -> str:
    """A point on an axis in a sentence's middle.

    >>> _unit("tokens", 99_876.2), _unit("step", 30.0)
    ('99,876 tokens', 'step 30')
    """
    return at(axis, value).split(" ", 1)[1]


def _speedups(parts: _Parts) -> str:
    speedup = parts.speedup
    arms = parts.ranked[:2]
    if speedup is None:
        early = [a.name for a in arms if a.race.get("before_first")]
        met = listing(early, sep=" and " if len(early) == 2 else ", ")
        return f"; no speedup is measured, as {met} already met it at the first log" \
            if early else ""
    out = f"; {speedup['faster']} {ratio(speedup['value'])} sooner on {parts.axis}"
    if speedup.get("interval"):
        low, high = speedup["interval"]
        what = {"clear": "clear", "unreplicated": "beyond the runs' own noise, unreplicated",
                "within-noise": "within the noise: no real speedup"}[speedup["call"]]
        out += f" (95% interval {ratio(low)} to {ratio(high)}, {what})"
    walls = [(a.name, float(w)) for a in arms if (w := a.race.get("elapsed"))]
    if len(walls) == len(arms):
        (fast, a), (_slow, b) = sorted(walls, key=lambda item: item[1])
        out += f"; {fast} {ratio(b / a)} sooner in wall-clock, {seconds(a)} against {seconds(b)}"
    return out


def _cost(parts: _Parts) -> str:
    arms = parts.ranked[:2]
    if len(arms) < 2:
        return ""
    where = at(parts.axis, parts.budget).replace("At ", "", 1).replace("After ", "", 1)
    pieces = []
    wall = _compare(arms, "elapsed", seconds, "wall-clock", "less")
    if wall:
        pieces.append(wall + _devices(arms, parts))
    counted = _compare(arms, "flops", flops, "training FLOPs", "fewer")
    if counted:
        pieces.append(counted)
    if not pieces:
        return f"What reaching {where} cost is unknown: no wall times or FLOPs were logged."
    return f"Cost to reach {where}: {'; '.join(pieces)}.{_sources(parts)}"


def _compare(arms: list[_Arm], key: str, show: Any, what: str, less: str) -> str:
    (a, b) = arms
    va, vb = a.cost.get(key), b.cost.get(key)
    if not va or not vb:
        return ""
    (cheap, low), (_dear, high) = sorted(((a.name, va), (b.name, vb)), key=lambda i: i[1])
    if high / low < 1.01:
        return f"{what} {show(va)} for {a.name} and {show(vb)} for {b.name}, about the same"
    return (f"{what} {show(va)} for {a.name} against {show(vb)} for {b.name}, "
            f"{ratio(high / low)} {less} for {cheap}")


def _devices(arms: list[_Arm], parts: _Parts) -> str:
    worlds = {run.name: run.batch.world_size.value for run in parts.runs}
    sizes = [{worlds.get(r) for r in arm.runs} for arm in arms]
    known = [size for (size,) in (s for s in sizes if len(s) == 1) if size is not None]
    if len(known) != len(sizes):
        return ", device-time unknown (a world size is unknown: pass --set RUN:world_size=N)"
    wa, wb = known
    if wa == wb:
        each = f"{wa} device{'s' if wa > 1 else ''} each"
        return f", and the same ratio in device-time (elapsed × world size, {each})"
    device = _compare(arms, "device_hours", lambda h: seconds(h * 3600), "device-time", "less")
    return f"; {device} (elapsed × world size, {wa} and {wb} devices)"


def _sources(parts: _Parts) -> str:
    """Where the wall-clock and FLOP numbers come from, each source once."""
    named = {n for arm in parts.ranked[:2] for n in arm.runs}
    listed: list[str] = []
    for label, axis in (("wall-clock from", "elapsed"), ("FLOPs from the", "flops")):
        for run in parts.runs:
            source = run.axis_sources.get(axis)
            text = f"{label} {source.split(';')[0]}" if source and run.name in named else None
            if text and text not in listed:
                listed.append(text)
    return f" Sources: {'; '.join(listed)}." if listed else ""


def _fair(parts: _Parts) -> str:
    question = AXIS_QUESTIONS.get(parts.axis, parts.axis)
    text = f"Decided on {parts.axis} ({question})"
    text += f": {parts.reason}." if parts.reason else "."
    if parts.fairness:
        return f"{text} Caveats: {'; '.join(parts.fairness)}."
    return f"{text} No fairness warnings."
