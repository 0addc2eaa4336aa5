"""The fairness audit: can these runs be compared on this axis, and what would make it fair?

Each finding has a stable code, says what it means for the conclusion and how to fix it:

- ``global-batch-mismatch``  comparing on optimizer steps (or micro-steps, epochs) while global
                             batches differ: a step of one run sees more data than the other's.
- ``seq-len-mismatch``       sequence lengths differ: samples are not the same amount of text.
- ``step-unit-mismatch``     the sources count steps differently, or a step counts log calls.
- ``world-size-unknown``     the global batch cannot be checked against the configuration.
- ``lr-not-rescaled``        batches differ but the peak learning rate is the same.
- ``padding-counted-as-tokens``  a token counter that includes padding drives the tokens axis.
- ``loss-normalisation-changed``  transformers before 4.46 (the October 2024 gradient-accumulation
                             loss fix) with accumulation > 1: its loss is not comparable.
- ``different-eval-cadence`` eval metrics measured at different points of the axis.
- ``axis-fallback``          (info) no ``--x`` was given and some run lacks tokens: which runs,
                             and the fact that would give them.
- ``axis-question``          (info) which question the compared axis answers: tokens and
                             samples data efficiency, FLOPs compute efficiency, device-hours
                             and wall-clock the cost on this hardware.

Per-run findings (``damaged-input``, ``duplicates-dropped``, ``accum-overshoot``,
``batch-mismatch``) come from reading and resolving and travel with each run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .display import LISTED, fmt, listing, set_prefix
from .model import Finding, Run, known_values

__all__ = ["AXIS_QUESTIONS", "LOSS_FIX_VERSION", "audit", "propose_axis"]

#: What each axis answers.
AXIS_QUESTIONS = {
    "tokens": "data efficiency: quality per token trained on",
    "samples": "data efficiency: quality per sequence trained on",
    "flops": "compute efficiency: quality per training FLOP",
    "device_hours": "cost on this hardware: quality per device-hour",
    "elapsed": "cost on this hardware: quality per second of wall-clock",
    "step": "quality per optimizer update",
    "micro_step": "quality per forward-backward pass",
    "epoch": "quality per pass over the data",
}

#: First transformers release with the gradient-accumulation loss normalisation fix.
LOSS_FIX_VERSION = (4, 46)
_STEP_AXES = ("step", "micro_step", "epoch")


def propose_axis(runs: Sequence[Run]) -> str:
    """The fair axis: tokens if every run has them, else samples, else optimizer steps."""
    for axis in ("tokens", "samples"):
        if all(r.scalars.get_column(axis).null_count() < r.scalars.height for r in runs):
            return axis
    return "step"


def axis_fallback(runs: Sequence[Run], proposed: str) -> list[Finding]:
    """The one line that says the fair axis fell back from tokens, and which runs made it
    (``axis-fallback``, info): for a comparison whose axis was not given."""
    if proposed == "tokens" or not runs:
        return []
    lacking = [r.name for r in runs if r.scalars.get_column("tokens").null_count()
               == r.scalars.height]
    key, what = "seq_len", "sequence length"
    if proposed == "step":
        lacking = [r.name for r in runs if r.scalars.get_column("samples").null_count()
                   == r.scalars.height] or lacking
        key, what = "global_batch", "global batch"
    fix = f"--set {set_prefix(lacking)}{key}=N"
    if 1 < len(lacking) < len(runs):  # KEY=N sets the runs that know it too
        fix += f" for every run, or RUN:{key}=N for one"
    names = f"all {len(runs)} runs" if len(lacking) == len(runs) > LISTED else listing(lacking)
    return [Finding("info", "axis-fallback",
                    f"compared on {proposed}, not tokens: {names} "
                    f"{'has' if len(lacking) == 1 else 'have'} no {what} ({fix})")]


def audit(runs: Sequence[Run], *, x: str) -> list[Finding]:
    """Findings about comparing ``runs`` on axis ``x`` (empty for a fair comparison)."""
    checks = (_batch, _seq_len, _step_units, _world_size, _learning_rate, _padding,
              _token_sources, _loss_normalisation, _eval_cadence, _axis_question)
    return [finding for check in checks for finding in check(runs, x)]


def _axis_question(runs: Sequence[Run], x: str) -> list[Finding]:
    if len(runs) < 2 or x not in AXIS_QUESTIONS:
        return []
    return [Finding("info", "axis-question",
                    f"compared on {x}, which answers {AXIS_QUESTIONS[x]}; tokens answer data "
                    "efficiency, flops compute efficiency, device_hours and elapsed the cost "
                    "on this hardware (--x picks one)")]


def _known(runs: Sequence[Run], get: Callable[[Run], float | None]) -> dict[str, float]:
    """Each run's value that ``get`` finds, by run name (runs without one left out)."""
    found = {run.name: get(run) for run in runs}
    return {name: value for name, value in found.items() if value is not None}


def _listing(values: Mapping[str, float]) -> str:
    """Runs and their values for a message.

    >>> _listing({"a": 16, "b": 25600.0, "c": 0.5})
    'a 16, b 25,600, c 0.5'
    """
    return listing([f"{name} {fmt(value)}" for name, value in values.items()])


def _batch(runs: Sequence[Run], x: str) -> list[Finding]:
    batches = _known(runs, lambda r: r.batch.global_batch.value)
    if x not in _STEP_AXES or len(set(batches.values())) < 2:
        return []
    return [Finding("warning", "global-batch-mismatch",
                    f"comparing on {x} while global batches differ ({_listing(batches)} "
                    "sequences per step): a step of one run sees more data than a step of "
                    f"another, so the curves are not comparable; use --x {propose_axis(runs)}")]


def _seq_len(runs: Sequence[Run], x: str) -> list[Finding]:
    lengths = _known(runs, lambda r: r.batch.seq_len.value)
    if len(set(lengths.values())) < 2:
        return []
    if x == "tokens":
        return [Finding("info", "seq-len-mismatch",
                        f"sequence lengths differ ({_listing(lengths)}); the tokens axis "
                        "accounts for it, but per-token losses of different context lengths "
                        "are not strictly the same task")]
    return [Finding("warning", "seq-len-mismatch",
                    f"sequence lengths differ ({_listing(lengths)}): a sample of one run is "
                    f"not the same amount of text as a sample of another; use --x tokens")]


def _step_units(runs: Sequence[Run], x: str) -> list[Finding]:
    units = {run.name: run.step_unit for run in runs}
    odd = {name: unit for name, unit in units.items() if unit == "log_call"}
    if len(set(units.values())) < 2 and not odd:
        return []
    detail = ", ".join(f"{name} counts {unit}" for name, unit in units.items())
    return [Finding("warning", "step-unit-mismatch",
                    f"the runs' steps mean different things ({detail}); a log-call step is not "
                    "an optimizer step: set the real step with --set RUN:step_metric=NAME, or "
                    "compare on samples or tokens")]


def _world_size(runs: Sequence[Run], x: str) -> list[Finding]:
    return [Finding("info", "world-size-unknown",
                    f"the world size is unknown, so the global batch "
                    f"({run.batch.global_batch.value or 'unknown'}) cannot be checked against "
                    f"its configuration; pass --set {run.name}:world_size=N", run.name)
            for run in runs if run.batch.world_size.value is None]


def _learning_rate(runs: Sequence[Run], x: str) -> list[Finding]:
    batches = _known(runs, lambda r: r.batch.global_batch.value)
    rates = {name: rate for name, rate in _known(
        runs, lambda r: r.facts["learning_rate"].value if "learning_rate" in r.facts
        else None).items() if name in batches}
    if len(set(batches.values())) < 2 or len(rates) < 2 or len(set(rates.values())) > 1:
        return []
    base_run = min(batches, key=lambda name: batches[name])
    base_batch, lr = batches[base_run], rates[base_run]
    rules = "; ".join(
        f"{name}: linear rule {lr * batch / base_batch:.3g}, square-root rule "
        f"{lr * math.sqrt(batch / base_batch):.3g}"
        for name, batch in batches.items() if batch != base_batch and name in rates)
    return [Finding("warning", "lr-not-rescaled",
                    f"global batches differ ({_listing(batches)}) but every run uses peak "
                    f"learning rate {lr:g}; the larger-batch runs may be under-tuned, which "
                    f"favours the smaller batch. Rescaled from {base_run}: {rules}")]


def _padding(runs: Sequence[Run], x: str) -> list[Finding]:
    if x != "tokens":
        return []
    findings = []
    for run in runs:
        mode = _fact(run, "include_num_input_tokens_seen")
        counted = run.axis_sources.get("tokens", "").startswith("logged counter num_input")
        if counted and str(mode).lower() in ("true", "all"):
            findings.append(Finding(
                "warning", "padding-counted-as-tokens",
                "the tokens axis is the Trainer's num_input_tokens_seen with "
                f"include_num_input_tokens_seen={mode}, which counts padding: with padded "
                "batches it overstates the tokens trained on. Use "
                "include_num_input_tokens_seen='non_padding', or drop the counter and pass "
                f"--set {run.name}:seq_len=N for the schedule", run.name))
    return findings


def _token_sources(runs: Sequence[Run], x: str) -> list[Finding]:
    """Tokens counted by a logged counter in some runs and worked out from the schedule
    (steps × global batch × sequence length: every sequence full) in others."""
    if x != "tokens" or len(runs) < 2:
        return []
    counted = [r.name for r in runs if r.axis_sources.get("tokens", "").startswith("logged")]
    scheduled = [r.name for r in runs if r.axis_sources.get("tokens", "").startswith("schedule")]
    if not counted or not scheduled:
        return []
    return [Finding("warning", "token-sources-differ",
                    f"the tokens of {listing(counted)} are a logged counter and those of "
                    f"{listing(scheduled)} are steps × global batch × sequence length, which "
                    "takes every sequence as full: with padding or packing the two count "
                    "different things. Give every run the same source (a counter for all, or "
                    "drop the counters with --source and --set seq_len=N)")]


def _fact(run: Run, name: str) -> object:
    fact = run.facts.get(name)
    return None if fact is None else fact.value


def _version(text: object) -> tuple[int, ...] | None:
    """Major and minor version.

    >>> _version("4.45.2"), _version("5.24.0.dev0"), _version(None)
    ((4, 45), (5, 24), None)
    """
    if text is None:
        return None
    parts = []
    for piece in str(text).split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        if not digits:
            return None
        parts.append(int(digits))
    return tuple(parts)


def _loss_normalisation(runs: Sequence[Run], x: str) -> list[Finding]:
    old = []
    eras = set()
    for run in runs:
        version = _version(_fact(run, "transformers_version"))
        accum = run.batch.grad_accum.value
        if version is None:
            continue
        before = version < LOSS_FIX_VERSION and (accum or 1) > 1
        eras.add(before)
        if before:
            old.append(f"{run.name} (transformers {run.facts['transformers_version'].value}, "
                       f"accumulation {accum})")
    if not old or len(runs) < 2 or (eras == {True} and len(_known(
            runs, lambda r: r.batch.grad_accum.value)) < 2):
        return []
    return [Finding("warning", "loss-normalisation-changed",
                    f"{', '.join(old)} trained before transformers 4.46 fixed how the loss is "
                    "normalised under gradient accumulation: where micro-batches hold different "
                    "numbers of tokens (variable lengths, padding), its logged training loss is "
                    "a mean of micro-batch means, biased and not comparable to the other runs'; "
                    "compare eval metrics, or retrain with transformers ≥ 4.46")]


def _eval_cadence(runs: Sequence[Run], x: str) -> list[Finding]:
    findings = []
    for metric in ("eval/loss",):
        points = {}
        for run in runs:
            frame = run.points_of(metric)
            column = frame.get_column(x) if x in frame.columns else None
            if column is not None and column.null_count() < frame.height:
                points[run.name] = np.unique(known_values(column)).tolist()
        if len(points) < 2 or len({tuple(v) for v in points.values()}) < 2:
            continue
        every = {name: (v[1] - v[0]) if len(v) > 1 else v[0] for name, v in points.items()}
        findings.append(Finding(
            "info", "different-eval-cadence",
            f"{metric} was measured at different {x} ({_listing(every)} apart): compare it "
            "at the common budget, where values are interpolated, or evaluate at matching "
            "points"))
    return findings
