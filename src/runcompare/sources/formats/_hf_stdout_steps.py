"""The steps of the HF Trainer's printed dicts, which carry none (:mod:`.hf_stdout`'s module
docstring says how): from the progress bar, else counted with logging_steps / eval_steps,
gaps filled at the logging interval, then checked against the logged epoch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ...errors import MissingInfoError
from ...model import Finding

__all__ = ["epoch_check", "steps"]


def steps(events: pl.DataFrame, info: dict[str, Any], hints: dict[str, Any],
           file: Path, printed: dict[str, tuple[int, str]] | None = None
           ) -> tuple[pl.DataFrame, list[Finding]]:
    """pos, off, leg, kind, epoch and step of every dict that gets a step (how: the
    :mod:`.hf_stdout` module docstring); ``printed``: logging_steps / eval_steps -> (value,
    where) as a TrainingArguments printed in the log states them."""
    printed = printed or {}
    findings: list[Finding] = []
    per = events.filter(ev="dict")
    total, divisor = _bar_total(per, info, findings, file)
    per = per.with_columns(bar_step=pl.when(pl.col("total") == (total or -1))
                           .then(pl.col("n") // divisor))
    buffered = per.filter(pl.col("glued") & (pl.col("kind") == "train")).get_column("leg").unique()
    if buffered.len():
        per = per.with_columns(bar_step=pl.when(pl.col("leg").is_in(buffered.implode()))
                               .then(None).otherwise("bar_step"))
        findings.append(Finding("warning", "stdout-buffered",
                                f"{file}: the Trainer's dicts came in blocks with no progress "
                                "bar between them (as they do when stdout is block-buffered, "
                                "e.g. python without -u), so the bars cannot tell their steps; "
                                "their "
                                "steps are counted with logging_steps instead"))
    resume = events.filter(pl.col("resume").is_not_null()).group_by("leg").agg(
        start=pl.col("resume").last())
    starts = dict(resume.select("leg", "start").iter_rows())  # a leg or two: no join
    per = per.with_columns(start=pl.col("leg").replace_strict(starts, default=0,
                                                              return_dtype=pl.Int64)
                           if starts else pl.lit(0, pl.Int64))
    per = _counted(per, _logging_steps(per, info, hints, findings, file, printed), hints,
                   findings, file, printed)
    per = _fill_gaps(per, findings, file)
    per = _from_history(per, events.filter(ev="history"), hints, findings, file)
    known = pl.when(pl.col("kind").is_in(["train", "eval"])).then("step")
    per = per.with_columns(last=_in_leg(known.forward_fill(), per))
    at_end = pl.coalesce(pl.lit(_int(hints.get("max_steps")) or info.get("max_steps"),
                                pl.Int64), "last")
    per = per.with_columns(step=pl.when(pl.col("step").is_null() & (pl.col("kind") == "summary"))
                           .then(at_end).otherwise(pl.coalesce("step", "last")))
    missing = per.filter(pl.col("step").is_null() & pl.col("kind").is_in(["train", "eval"]))
    if missing.height:
        what = missing.get_column("kind")[0]
        key = "logging_steps" if what == "train" else "eval_steps"
        raise MissingInfoError(
            f"{file}: {missing.height} of the Trainer's {what} logs carry no step and no "
            f"progress bar tells it (first at line {missing.get_column('line')[0]}); pass "
            f"--set {key}=N (the run's TrainingArguments.{key}) or write `{key} = N` in a "
            "runcompare.toml beside the log")
    stepped = per.filter(pl.col("step").is_not_null())
    if stepped.is_empty():  # a summary (or test) dict alone, and nothing tells its step
        kinds = ", ".join(sorted(set(per.get_column("kind").drop_nulls())))
        raise MissingInfoError(
            f"{file}: none of the Trainer's {per.height} log dicts ({kinds}) has a step: no "
            f"progress bar, train log or 'Total optimization steps' tells it (first at line "
            f"{per.get_column('line')[0]}); pass --set max_steps=N (the step the summary "
            "was printed at) or --set logging_steps=N")
    return stepped, findings


def _bar_total(per: pl.DataFrame, info: dict[str, Any], findings: list[Finding],
               file: Path) -> tuple[int | None, int]:
    """The training bar's total and what to divide its count by to get optimizer steps."""
    max_steps, accum = info.get("max_steps"), info.get("grad_accum")
    totals = per.filter(kind="train").get_column("total").drop_nulls()
    seen = _mode(totals) if totals.len() else None
    if max_steps and accum and accum > 1 and seen == max_steps * accum:
        findings.append(Finding(
            "info", "bar-counts-micro-steps",
            f"{file}: the progress bar counts {seen} micro-steps (Total optimization steps "
            f"{max_steps} × Gradient Accumulation steps {accum}); its count ÷ {accum} is the step"))
        return seen, accum
    if max_steps and seen is not None and seen != max_steps:
        findings.append(Finding(
            "warning", "bar-total-mismatch",
            f"{file}: the progress bar's total {seen} is neither Total optimization steps "
            f"{max_steps} nor that × the accumulation; its counts are not used as steps"))
        return max_steps, 1
    return seen if seen is not None else max_steps, 1


def _logging_steps(per: pl.DataFrame, info: dict[str, Any], hints: dict[str, Any],
                   findings: list[Finding], file: Path,
                   printed: dict[str, tuple[int, str]]) -> int | None:
    """logging_steps from the hints, else (when some train log lacks a bar step) as the log
    prints it (a TrainingArguments dump), else from the epoch advance between train logs ×
    Num update steps per epoch."""
    given = _int(hints.get("logging_steps"))
    train = per.filter(kind="train")
    barless = train.get_column("bar_step").null_count()
    if not given and barless and "logging_steps" in printed:
        every, where = printed["logging_steps"]
        findings.append(Finding("info", "logging-steps-from-log",
                                f"{file}: {barless} train log(s) have no progress bar to tell "
                                f"their step; counted with the {where}"))
        return every
    if given or info.get("steps_per_epoch") is None or not barless:
        return given
    advance: pl.Series = train.select(_in_leg(pl.col("epoch").diff(), train)
                                      * info["steps_per_epoch"]).to_series().drop_nulls()
    advance = advance.filter(advance > 0.5)
    if advance.is_empty():
        return None
    every = round(float(advance.median()))  # type: ignore[arg-type]
    if every < 1 or (advance - every).abs().max() > 0.05 * every + 0.01:
        return None
    findings.append(Finding("info", "logging-steps-from-epoch",
                            f"{file}: logging_steps {every} inferred from the epoch advance "
                            f"between train logs × {info['steps_per_epoch']} update steps per "
                            "epoch; pass --set logging_steps=N to state it"))
    return every


def _counted(per: pl.DataFrame, logging_steps: int | None, hints: dict[str, Any],
             findings: list[Finding], file: Path,
             printed: dict[str, tuple[int, str]]) -> pl.DataFrame:
    """Steps from a dict's own ``step`` key, else logging_steps / eval_steps counting when the
    user stated them (``--set`` comes before what the log shows), else the progress bar, else
    counting with an inferred logging_steps."""
    own = pl.col("own_step") if "own_step" in per.columns else pl.lit(None, pl.Float64)
    own = pl.when(own == own.round()).then(own).cast(pl.Int64)
    out = per.with_columns(step=pl.coalesce(own, "bar_step"))
    evals = _int(hints.get("eval_steps"))
    if evals is None and "eval_steps" in printed and \
            per.filter(kind="eval").get_column("bar_step").null_count():
        evals = printed["eval_steps"][0]
    for kind, key, every in (("train", "logging_steps", logging_steps),
                             ("eval", "eval_steps", evals)):
        if every is None:
            continue
        stated = every == _int(hints.get(key))
        is_kind = pl.col("kind") == kind
        k = _in_leg(is_kind.cast(pl.Int64).cum_sum(), per)
        out = out.with_columns(counted=pl.when(is_kind).then((pl.col("start") // every + k)
                                                             * every))
        wrong = out.filter(pl.col("counted") != pl.col("bar_step"))
        if wrong.height:
            row = wrong.row(0, named=True)
            used = f"using the {key} you stated" if stated else "using the progress bar"
            findings.append(Finding(
                "warning", "step-mismatch",
                f"{file}: {key}={every} puts {wrong.height} {kind} logs at other steps than the "
                f"progress bar (first: step {row['counted']} vs {row['bar_step']}); {used}"))
        order = [own, "counted", "step"] if stated else ["step", "counted"]
        out = out.with_columns(step=pl.coalesce(*order)).drop("counted")
    train = pl.when(pl.col("kind") == "train")
    prev_step = _in_leg(train.then("step").forward_fill(), per)
    prev_epoch = _in_leg(train.then("epoch").forward_fill(), per)
    same = (pl.col("kind") == "eval") & pl.col("step").is_null() & (pl.col("epoch") == prev_epoch)
    return out.with_columns(step=pl.when(same).then(prev_step).otherwise("step"))


def _fill_gaps(per: pl.DataFrame, findings: list[Finding], file: Path) -> pl.DataFrame:
    """Train logs without a step while others have one (a log cut right after a dict): the
    previous train step + the most common interval between train steps."""
    train = per.filter(kind="train")
    gaps = train.filter(pl.col("step").is_null())
    if gaps.is_empty() or gaps.height == train.height:
        return per
    diffs = train.select(_in_leg(pl.col("step").diff(), train)).to_series().drop_nulls()
    diffs = diffs.filter(diffs > 0)
    if diffs.is_empty():
        return per
    every = _mode(diffs)
    findings.append(Finding("info", "step-from-interval",
                            f"{file}: {gaps.height} train log(s) had no progress bar after them "
                            f"(the log ends or was cut there); each was put one logging "
                            f"interval ({every} steps, as the bar shows) after the one before"))
    # per gap: k, its train log's number in the leg, and the last train log before it in the
    # leg with a step (legs are runs of rows: the rows are in file order)
    is_train = per.select(pl.col("kind").eq("train").fill_null(False)).to_series().to_numpy()
    step = per.get_column("step")
    known = is_train & step.is_not_null().to_numpy()
    leg = per.get_column("leg").to_numpy()
    first = np.flatnonzero(np.r_[True, leg[1:] != leg[:-1]])
    counted = np.cumsum(is_train)
    k = counted - np.repeat(counted[first] - is_train[first], np.diff(np.r_[first, len(leg)]))
    rows = np.arange(len(leg))
    last = np.maximum.accumulate(np.where(known, rows, -1))
    gap = np.flatnonzero(is_train & ~known)
    before = last[gap]
    same_leg = (before >= 0) & (leg[np.maximum(before, 0)] == leg[gap])
    steps = step.fill_null(0).to_numpy()
    start = per.get_column("start").to_numpy()
    guess = np.where(same_leg, steps[np.maximum(before, 0)] + (k[gap] - k[np.maximum(before, 0)])
                     * every, (start[gap] // every + k[gap]) * every)
    return per.with_columns(step.scatter(gap, guess))


def _from_history(per: pl.DataFrame, history: pl.DataFrame, hints: dict[str, Any],
                  findings: list[Finding], file: Path) -> pl.DataFrame:
    """The steps of the last printed ``trainer.state.log_history`` (the Trainer's own record: each
    dict it printed, in order, with its step), given to the dicts it lists: the printed dicts
    of a kind it records, counted from the end, must match its entries in kind and epoch one
    for one, else it is not used. Steps the user stated (``--set logging_steps`` / ``eval_steps``)
    are kept."""
    if history.is_empty():
        return per
    listed = history.filter(pl.col("pos") == history.get_column("pos").max())
    listed = listed.filter(pl.col("kind").is_in(_RECORDED))
    mine = per.with_row_index("row").filter(pl.col("kind").is_in(_RECORDED))
    n = min(mine.height, listed.height)
    mine, listed = mine.tail(n), listed.tail(n)
    line = history.get_column("line")[-1]
    near = (pl.col("epoch") - pl.col("listed_epoch")).abs() \
        <= pl.max_horizontal(pl.col("epoch").abs() * 6e-4, pl.lit(0.0051)) + 0.0051
    pair = mine.select("kind", "epoch").with_columns(
        listed_kind=listed.get_column("kind"), listed_epoch=listed.get_column("epoch"))
    both_none = pl.col("epoch").is_null() & pl.col("listed_epoch").is_null()
    same = (pl.col("kind") == pl.col("listed_kind")) & (near | both_none)
    matched = pair.select(same.fill_null(False).all()).item()
    if not n or not matched:
        findings.append(Finding("info", "log-history-unmatched",
                                f"{file}: the trainer.state.log_history printed at line {line} "
                                "does not list the printed dicts in their order; its steps are "
                                "not used"))
        return per
    stated = [kind for kind, key in (("train", "logging_steps"), ("eval", "eval_steps"))
              if _int(hints.get(key))]
    own = listed.get_column("own_step")
    mine = mine.with_columns(given=pl.when(pl.col("kind").is_in(stated) | own.is_null()
                                           | (own != own.round())).then("step")
                             .otherwise(own.cast(pl.Int64)))
    moved = mine.filter(pl.col("given").ne_missing(pl.col("step")))
    if moved.height:
        first = moved.row(0, named=True)
        was = f"step {first['step']}" if first["step"] is not None else "no step"
        findings.append(Finding(
            "info", "steps-from-log-history",
            f"{file}: the trainer.state.log_history printed at line {line} gives the steps of "
            f"{n} printed dicts; {moved.height} differ from what the progress bars or counting "
            f"gave (first: the {first['kind']} log at epoch {first['epoch']}, step "
            f"{first['given']}, not {was}); using the log_history's"))
    return per.with_columns(per.get_column("step").scatter(mine.get_column("row"),
                                                           mine.get_column("given")))


#: The kinds of dict the Trainer's log_history records (test/predict metrics it does not).
_RECORDED = ("train", "eval", "summary")


def _in_leg(expr: pl.Expr, frame: pl.DataFrame) -> pl.Expr:
    """``expr`` computed within each leg of ``frame``: a window over the legs only when there
    are several (a window hashes every row, a costly no-op for a log of one leg)."""
    legs = frame.get_column("leg")
    return expr.over("leg") if legs.len() and legs.min() != legs.max() else expr


def _mode(values: pl.Series) -> int:
    """The most common of some integers (the smallest of a tie); at once when all are equal."""
    low = values.min()
    if low == values.max():
        return int(low)  # type: ignore[arg-type]
    return int(values.mode().min())  # type: ignore[arg-type]


def _by_leg(frame: pl.DataFrame) -> list[tuple[int, pl.DataFrame]]:
    """``frame``'s rows per leg, in order (no partitioning copy for a log of one leg)."""
    legs = frame.get_column("leg")
    if legs.is_empty() or legs.min() == legs.max():
        return [(int(legs[0]), frame)] if legs.len() else []
    return [(leg, rows) for (leg,), rows in frame.group_by("leg", maintain_order=True)]


def _int(value: object) -> int | None:
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None
    return number if number >= 1 else None


def epoch_check(per: pl.DataFrame, info: dict[str, Any], file: Path) -> list[Finding]:
    """Warn where the logged epoch does not advance evenly with the reconstructed step."""
    train = per.filter((pl.col("kind") == "train") & pl.col("epoch").is_not_null())
    findings = []
    spe = info.get("steps_per_epoch")
    for leg, rows in _by_leg(train):
        if rows.get_column("step").min() == rows.get_column("step").max():
            continue
        first, last = rows.row(0, named=True), rows.row(-1, named=True)
        rate = (last["epoch"] - first["epoch"]) / (last["step"] - first["step"])
        tol = pl.max_horizontal(pl.col("epoch").abs() * 6e-4, pl.lit(0.0051)) + 0.0051
        off = rows.filter((pl.col("epoch") - first["epoch"]
                           - rate * (pl.col("step") - first["step"])).abs() > tol)
        if off.height or (spe and abs(rate * spe - 1) > 0.02):
            row = off.row(0, named=True) if off.height else last
            per_epoch = f"; the log says {spe} update steps per epoch" if spe else ""
            findings.append(Finding(
                "warning", "epoch-mismatch",
                f"{file}: leg {leg}: the logged epoch does not advance evenly with the "
                f"reconstructed steps (epoch {row['epoch']} at step {row['step']}, "
                f"{rate:.6g} epochs per step{per_epoch}); check --set logging_steps"))
    return findings
