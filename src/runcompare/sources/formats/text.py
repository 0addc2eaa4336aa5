"""Plain-text logs of hand-written training loops: ``key=value`` / ``key: value`` lines.

Three ways a line gives a point, tried in this order:

* ``--pattern REGEX`` (the ``pattern`` hint): a regex in Rust syntax with named groups; a
  ``step`` (or ``iter``) group is required; ``wall_time`` (unix seconds or a
  ``YYYY-MM-DD HH:MM:SS`` stamp) and ``epoch`` are read as such; every other named group is a
  metric (``loss`` -> ``train/loss``, ``eval_loss`` -> ``eval/loss``). Other lines are ignored.
* the seed-format trainer: ``[step 1 epoch 0.0000] loss=11.24 tflops=27.1 mfu=28.3`` (step =
  optimizer step; ``epoch`` -> ``train/epoch``; the rest are ``key=value`` pairs);
* generic: every ``key=value`` or ``key: value`` pair with a numeric value (units such as
  ``ms`` or ``%`` after it are dropped) on a line; the step is the pair named ``step``,
  ``global_step``, ``iter``, ``iteration`` or ``it``. A line with pairs but no step takes the
  step of the line before it (an evaluation line), which a ``step-carried`` finding reports;
  a log with no step at all is numbered by log line (step unit ``log_call``).

Names are printed-log names (:data:`~runcompare.sources.naming.PRINTED`): ``loss`` -> ``train/loss``, ``lr`` ->
``train/learning_rate``, ``val_loss``/``eval_loss`` -> ``eval/loss``, names with ``/`` kept.

A tqdm bar in the log (its ``\\r`` redraws are split into their own lines) tells optimizer
from micro-steps: each step line was printed when the bar stood at step × accumulation
micro-steps, between the count shown just before and just after the line. When one whole
accumulation ≥ 2 fits every line (and divides the bar's total), it is reported as an
``inferred`` grad_accum fact, and the total ÷ it as max_steps.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from ...errors import InputError, UsageError
from ...model import Fact, Finding, RawLog
from ..format import Format
from ..naming import PRINTED, canonical_names
from ..textlog.damage import unparsed_finding
from ..textlog.logs import logs_at
from ..textlog.points import number_legs
from ..textlog.rows import read_rows
from ..textlog.values import clean_text, number, split_cr, timestamp

__all__ = ["FORMAT", "claims", "read"]


STEP_KEYS = ("step", "global_step", "iter", "iteration", "it", "train/global_step")
_SEED = r"\[step (?<step>\d+) epoch (?<epoch>[-+\d.eE]+)\]"
_NUMBER = r"[-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf)"
_PAIR = rf"(?:^|[\s,;|(\[])[A-Za-z_][\w./-]*\s*(?:=|:\s)\s*{_NUMBER}[A-Za-z%/]*"
_STEPPED = (r"(?im)(?:^|[\s,;|\[])(?:step|global_step|iter|iteration)\s*(?:=|:)\s*\d+"
            r".*[A-Za-z_]\w*\s*(?:=|:)\s*[-+.\d]")
_BAR = r"(\d+)/(\d+) \["
#: Everything up to the end of a tqdm bar (``... 20/160 [00:02<00:17,  7.91it/s]``).
_BAR_END = r"^.*?\d+/\d+ \[[^\]]*\]"


def claims(head: str) -> bool:
    """The seed format, or several lines of ``step=N key=value`` pairs (a file that a more
    specific text format claims too is that format's: the registry's order decides)."""
    if re.search(r"\[step \d+ epoch [-+\d.eE]+\]", head):
        return True
    return len(re.findall(_STEPPED, head)) >= 2



def read(path: Path, *, hints: Mapping[str, object] | None = None,
         claims: Callable[[str], bool] = claims) -> RawLog:
    """Every point of the text log(s) at ``path``; ``hints["pattern"]`` is ``--pattern``."""
    hints = dict(hints or {})
    pattern = hints.get("pattern")
    missing = ("no text log found (lines of key=value pairs with a step, e.g. 'step=100 "
               "loss=2.31'; pass --pattern REGEX for other formats)")
    if pattern:
        groups = _compile_pattern(str(pattern))
        logs = logs_at(path, lambda head: True, missing=missing)
        parse = _pattern_parser(str(pattern), groups)
    else:
        logs = logs_at(path, claims, missing=missing)
        parse = _parse
    rows, findings = read_rows(logs, parse)
    return _assemble(path, logs, rows, findings, pattern)


def _parse(frame: pl.DataFrame) -> pl.DataFrame:
    """Per chunk: the step and pairs of each line that has any, and the tqdm bars around them."""
    seg = split_cr(frame).with_row_index("i")
    text = pl.col("text")
    has_pair = text.str.contains("=", literal=True) | text.str.contains(": ", literal=True)
    is_bar = text.str.contains("it/s", literal=True) | text.str.contains("s/it", literal=True)
    seg = seg.with_columns(has_pair=has_pair, is_bar=is_bar)
    near = pl.col("has_pair").shift(1) | pl.col("has_pair").shift(-1) | (pl.col("i") < 2) \
        | (pl.col("i") >= pl.len() - 2)
    seg = seg.filter(pl.col("has_pair") | (pl.col("is_bar") & near.fill_null(True)))
    seg = seg.with_columns(text=pl.when(text.str.contains("\x1b", literal=True))
                           .then(clean_text(text)).otherwise(text))
    seed = text.str.extract_groups(_SEED)
    bar = text.str.extract_groups(_BAR)
    after_bar = pl.when("is_bar").then(text.str.replace(_BAR_END, "")).otherwise(text)
    return seg.select(
        "line", "i", text=pl.when("has_pair").then(text.str.slice(0, 300)),
        seed_step=seed.struct.field("step").cast(pl.Int64, strict=False),
        seed_epoch=seed.struct.field("epoch").cast(pl.Float64, strict=False),
        pairs=pl.when("has_pair").then(after_bar.str.extract_all(_PAIR)),
        n=pl.when("is_bar").then(bar.struct.field("1").cast(pl.Int64, strict=False)),
        total=pl.when("is_bar").then(bar.struct.field("2").cast(pl.Int64, strict=False)),
        wall_time=pl.when("has_pair").then(timestamp(text)))


def _pattern_parser(pattern: str, groups: list[str]) -> Callable[[pl.DataFrame], pl.DataFrame]:
    def parse(frame: pl.DataFrame) -> pl.DataFrame:
        seg = split_cr(frame)
        found = seg.with_columns(m=pl.col("text").str.extract_groups(pattern)).unnest("m")
        step = pl.coalesce(*(pl.col(g) for g in ("step", "iter") if g in groups))
        found = found.filter(step.is_not_null())
        wall = (pl.coalesce(number(pl.col("wall_time")),
                            timestamp(pl.col("wall_time")))
                if "wall_time" in groups else pl.lit(None, pl.Float64))
        return found.select("line", "text", seed_step=step.cast(pl.Int64, strict=False),
                            wall_time=wall, **{g: number(pl.col(g)) for g in groups
                                               if g not in ("step", "iter", "wall_time")})
    return parse


def _assemble(path: Path, logs: list[Path], rows: pl.DataFrame, findings: list[Finding],
              pattern: object) -> RawLog:
    rows = rows.sort("pos", "i") if "i" in rows.columns else rows.sort("pos")
    bars = rows.filter(pl.col("n").is_not_null()) if "n" in rows.columns else rows.clear()
    if pattern:
        long, bad = _pattern_points(rows)
    else:
        long, bad = _pair_points(rows.filter(pl.col("pairs").is_not_null()))
    if long.is_empty():
        what = f"--pattern {pattern!r} matched no line" if pattern else "no line held a step " \
            "and key=value pairs"
        raise InputError(f"{path}: {what}")
    unit = "optimizer"
    steps = long.filter(pl.col("step").is_not_null())
    if steps.is_empty():
        unit = "log_call"
        long = long.with_columns(step=pl.col("pos").rank("dense").cast(pl.Int64))
        findings.append(Finding("warning", "step-is-log-call",
                                f"{path}: no line names its step (step=, iter=, ...); points are "
                                "numbered by log line; pass --pattern with a (?P<step>...) "
                                "group to read the step"))
    long = _with_legs(long, findings, path)
    scalars = long.select("metric", "value", "step", "wall_time", pl.col("leg").cast(pl.Int32))
    finding = unparsed_finding(logs[0], bad, "log lines with a step")
    findings += [finding] if finding else []
    facts, more = _bar_facts(long, bars, logs[0])
    aliases = dict(long.select("metric", "key").unique("metric", keep="first",
                                                       maintain_order=True).iter_rows())
    return RawLog(path=path, scalars=scalars, step_unit=unit, facts=facts,
                  findings=findings + more, files=logs,
                  aliases={m: k for m, k in aliases.items() if m != k})


def _pair_points(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Long rows (pos, i, key, metric, value, step, wall_time) of every pair; bad lines."""
    pairs = rows.select("pos", "i", "line", "seed_step", "seed_epoch", "wall_time",
                        pair=pl.col("pairs")).explode("pair").filter(pl.col("pair").is_not_null())
    pairs = pairs.with_columns(
        key=pl.col("pair").str.extract(r"([A-Za-z_][\w./-]*)\s*(?:=|:)", 1),
        value=number(pl.col("pair").str.extract(r"(?:=|:\s)\s*(.*)$", 1)))
    is_step = pl.col("key").str.to_lowercase().is_in(list(STEP_KEYS))
    line_step = pairs.filter(is_step).group_by("pos", "i").agg(
        line_step=pl.col("value").first())
    pairs = pairs.join(line_step, on=["pos", "i"], how="left").filter(~is_step)
    step = pl.coalesce(pl.col("seed_step").cast(pl.Float64), "line_step")
    pairs = pairs.with_columns(step=step)
    bad = pairs.filter(pl.col("step").is_not_null() & (pl.col("step") != pl.col("step").round()))
    epochs = pairs.filter(pl.col("seed_epoch").is_not_null()).unique(
        ["pos", "i"], keep="first", maintain_order=True).select(
        "pos", "i", "line", "seed_step", "seed_epoch", "wall_time", "line_step", "step",
        key=pl.lit("epoch"), value="seed_epoch", pair=pl.lit(""))
    pairs = pl.concat([pairs, epochs.select(pairs.columns)])
    names = canonical_names(pairs.get_column("key").unique(maintain_order=True).drop_nulls(),
                            PRINTED)
    long = pairs.filter(pl.col("value").is_not_null()).select(
        "pos", "i", "key", metric=pl.col("key").replace_strict(names, return_dtype=pl.String),
        value="value", step=pl.col("step").cast(pl.Int64, strict=False), wall_time="wall_time")
    texts = rows.join(bad.select("pos", "i"), on=["pos", "i"], how="semi")
    return long.sort("pos", "i"), texts.select("line", "text")


def _pattern_points(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    columns = [c for c in rows.columns if c not in ("line", "text", "seed_step", "wall_time",
                                                    "pos")]
    long = rows.unpivot(on=columns, index=["pos", "seed_step", "wall_time"],
                        variable_name="key", value_name="value")
    names = canonical_names(columns, PRINTED)
    long = long.filter(pl.col("value").is_not_null()).select(
        "pos", pl.lit(0, pl.UInt32).alias("i"), "key",
        metric=pl.col("key").replace_strict(names, return_dtype=pl.String), value="value",
        step="seed_step", wall_time="wall_time")
    return long.sort("pos"), rows.clear().select("line", "text")


def _with_legs(long: pl.DataFrame, findings: list[Finding], path: Path) -> pl.DataFrame:
    """Carry the step to step-less lines, then number the legs (a step that goes back)."""
    lines = long.unique(["pos", "i"], keep="first", maintain_order=True).select(
        "pos", "i", own=pl.col("step"))
    lines = lines.with_columns(step=pl.col("own").forward_fill(), stepped=pl.col("own")
                               .is_not_null(), launch=pl.lit(False))
    lines = lines.with_columns(number_legs(lines, launch="launch", stepped="stepped"))
    carried = lines.filter(pl.col("own").is_null() & pl.col("step").is_not_null()).height
    dropped = lines.filter(pl.col("step").is_null()).height
    if carried:
        findings.append(Finding("info", "step-carried",
                                f"{path}: {carried} line(s) with values but no step were put at "
                                "the step of the line before them"))
    if dropped:
        findings.append(Finding("warning", "no-step",
                                f"{path}: {dropped} line(s) with values before the first step "
                                "were skipped"))
    long = long.drop("step").join(lines.select("pos", "i", "step", "leg"), on=["pos", "i"])
    return long.filter(pl.col("step").is_not_null())


def _bar_facts(long: pl.DataFrame, bars: pl.DataFrame,
               file: Path) -> tuple[dict[str, Fact[Any]], list[Finding]]:
    """grad_accum and max_steps from a tqdm bar over micro-steps (see the module docstring)."""
    facts: dict[str, Fact[Any]] = {}
    steps = long.get_column("step")
    if steps.len():
        facts["global_step"] = Fact(int(steps.max()), f"{file.name}: last step")  # type: ignore[arg-type]
    if bars.is_empty():
        return facts, []
    total = int(bars.get_column("total").max())  # type: ignore[arg-type]
    bars = bars.filter(total=total)
    lines = long.unique(["pos", "i"], keep="first", maintain_order=True).select("pos", "i", "step", is_line=pl.lit(True))
    # a bar drawn on the same line before the print comes first
    seq = pl.concat([lines, bars.select("pos", "i", "n", is_line=pl.lit(False))],
                    how="diagonal_relaxed").sort("pos", "i", "is_line")
    seq = seq.with_columns(before=pl.col("n").forward_fill().shift(1),
                           after=pl.col("n").backward_fill().shift(-1)).filter("is_line")
    seq = seq.filter(pl.col("step") > 0)
    low = seq.select((pl.col("before") / pl.col("step")).ceil().max()).item()
    high = seq.select((pl.col("after") / pl.col("step")).floor().min()).item()
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return facts, []
    fits = [a for a in range(max(1, int(low)), int(high) + 1) if total % a == 0]
    if len(fits) != 1 or fits[0] < 2:
        return facts, []
    accum = fits[0]
    where = f"inferred: {file.name} tqdm bar ({total} in all) at each step line"
    facts["grad_accum"] = Fact(accum, where, "inferred")
    facts["max_steps"] = Fact(total // accum, f"inferred: {file.name} tqdm bar total {total} ÷ "
                              f"accumulation {accum}", "inferred")
    return facts, [Finding("info", "bar-counts-micro-steps",
                           f"{file}: the progress bar counts {total} micro-steps, "
                           f"{total // accum} optimizer steps × accumulation {accum}: at every "
                           f"step line it stood around step × {accum}")]


FORMAT = Format(
    "text",
    "plain-text logs of key=value or key: value pairs with a step (step=100 loss=2.31), or any "
    "lines with --pattern REGEX",
    read=read, claims=claims, printed=True)


def _compile_pattern(pattern: str) -> list[str]:
    """The named groups of a user's ``--pattern`` regex; :class:`UsageError` when polars'
    (Rust) regex engine rejects it or it has no ``step`` or ``iter`` group.
    """
    try:
        pl.select(pl.lit("").str.extract_groups(pattern))
    except pl.exceptions.PolarsError as exc:
        raise UsageError(f"--pattern {pattern!r} is not a valid regular expression ({exc}); "
                         "runcompare uses Rust regex syntax: no look-around or "
                         "backreferences") from exc
    names = re.findall(r"\(\?P?<([A-Za-z_]\w*)>", pattern)
    if not {"step", "iter"} & set(names):
        raise UsageError(f"--pattern {pattern!r} needs a named group (?P<step>...) or "
                         "(?P<iter>...) holding the step; other named groups become metrics")
    return names
