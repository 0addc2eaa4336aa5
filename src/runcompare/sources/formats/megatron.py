"""Megatron-LM stdout: ``iteration N/ M | key: value | ...`` lines (with or without the
``[YYYY-MM-DD HH:MM:SS]`` prefix of 2024+ versions) and ``validation loss at ...`` lines.

Steps: ``iteration`` counts optimizer steps, 1-based, printed after the step. Metric names:

================================== ===============================================
printed                            canonical (alias = the printed name)
================================== ===============================================
lm loss                            ``train/loss`` (averaged over the log interval)
consumed samples                   ``train/consumed_samples`` (the samples axis; includes
                                   this iteration, exact through batch ramps)
learning rate                      ``train/learning_rate``
global batch size                  ``train/global_batch_size``
elapsed time per iteration (ms)    ``train/iteration_time_ms``
throughput per GPU (TFLOP/s/GPU)   ``train/tflops_per_gpu``
grad norm, loss scale, params norm ``train/grad_norm``, ``train/loss_scale``, ``train/params_norm``
number of skipped iterations       ``train/skipped_iterations``
number of nan iterations           ``train/nan_iterations``
any other ``key``                  ``train/<key in snake_case>`` (e.g. ``train/mtp_1_loss``)
validation ``lm loss value`` / PPL ``eval/loss`` / ``eval/ppl`` (``test/...`` for the test set)
================================== ===============================================

Facts: the ``arguments`` block Megatron prints at start (kind ``config``: micro_batch_size,
global_batch_size, seq_length, tensor/pipeline/context parallel sizes, world_size,
train_iters, log_interval, eval_interval, lr); from the lines (kind ``logged``): the global
batch size (the last one printed; a ``batch-ramp`` finding when it changed), ``max_steps``
(the ``/ M`` of the iteration), ``global_step``, ``skipped_iterations`` (the sum of the
per-line counts of the last leg: Megatron resets the count after each line) with a
``skipped-iterations`` warning, since those iterations consumed a batch but made no update.
Timestamps are read as UTC.
Restarts: a new ``arguments`` block or an iteration that does not go up starts a new leg;
``successfully loaded checkpoint ... at iteration K`` makes that leg start at K + 1.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from ...errors import InputError
from ...facts import facts_from_config
from ...model import Fact, Finding, RawLog
from ..config import hparams
from ..format import Format
from ..textlog import layout as _layout
from ..textlog.damage import unparsed_finding
from ..textlog.fields import KEY, delimited_fields
from ..textlog.layout import Layout, Piece
from ..textlog.lines import into, read_lines
from ..textlog.logs import logs_at
from ..textlog.points import number_legs, to_raw
from ..textlog.values import timestamp

__all__ = ["FORMAT", "claims", "read"]


_ITERATION = re.compile(r"iteration\s+\d+/\s*\d+\s*\|")
_TRAIN_NAMES = {
    "lm loss": "train/loss", "consumed samples": "train/consumed_samples",
    "skipped samples": "train/skipped_samples", "learning rate": "train/learning_rate",
    "decoupled learning rate": "train/decoupled_learning_rate",
    "global batch size": "train/global_batch_size",
    "elapsed time per iteration (ms)": "train/iteration_time_ms",
    "elapsed time per iteration (s)": "train/iteration_time_s",
    "throughput per GPU (TFLOP/s/GPU)": "train/tflops_per_gpu", "loss scale": "train/loss_scale",
    "grad norm": "train/grad_norm", "num zeros": "train/num_zeros",
    "params norm": "train/params_norm", "number of skipped iterations": "train/skipped_iterations",
    "number of nan iterations": "train/nan_iterations",
}
_VALID = (r"validation loss at (?:iteration\s+(?<step>\d+))?(?<rest>[^|]*)\|(?<pairs>.*)")
_ARG = r"^\s*(?<key>[a-z_][a-z0-9_]*) \.{3,} (?<value>.*?)\s*$"
_LOADED = r"loaded checkpoint .* at iteration\s+(?<step>\d+)"


def claims(head: str) -> bool:
    """Whether the beginning of a file looks like Megatron-LM's stdout."""
    return bool(_ITERATION.search(head)) or "end of arguments" in head and "-- arguments --" in head



def read(path: Path, *, hints: Mapping[str, object] | None = None,
         claims: Callable[[str], bool] = claims) -> RawLog:
    """Every point of every Megatron log at ``path`` (a file, or a folder's logs in name order)."""
    logs = logs_at(path, claims, missing="no Megatron-LM log found (a file with lines "
                          "like ' iteration 100/ 500000 | consumed samples: ... | lm loss: ...')")
    trains, others, findings = [], [], []
    for index, file in enumerate(logs):
        lines = read_lines(file, _parse, layout=_train_layout,
                                   merge=into("train"))
        where = {"pos": pl.col("line") + (index << 40), "name": pl.lit(file.name)}
        trains.append(lines.tables["train"].with_columns(**where))
        others.append(lines.tables["other"].with_columns(**where))
        findings += lines.findings(file)
    return _assemble(path, logs, pl.concat(trains, how="diagonal_relaxed"),
                     pl.concat(others), findings)


def _parse(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per chunk: train lines split into fields; validation, argument and restart lines kept."""
    text = pl.col("text")
    is_valid = text.str.contains("loss at ", literal=True)
    # "iteration N/ M |" (the memory report's "(after N iterations) memory (MB) |" is not one)
    is_train = frame.select(text.str.contains("iteration", literal=True)
                            & text.str.contains("|", literal=True) & ~is_valid
                            & text.str.contains(r"iteration\s+\d+\s*/")).to_series()
    # nearly every line of a long log is a train line: no filtering copies then
    every = bool(is_train.all())
    train = delimited_fields(frame if every else frame.filter(is_train), sep="|", kv=":")
    keys = [c for c in train.columns if c.startswith(KEY)]
    values = train.select(pl.col(c).cast(pl.Float64, strict=False) for c in keys)
    failed: pl.Expr | pl.Series = pl.lit(False)
    if values.null_count().row(0) != train.select(keys).null_count().row(0):  # a word, not a number
        failed = pl.select(pl.any_horizontal(False, *(
            values.get_column(c).is_null() & train.get_column(c).is_not_null() for c in keys
        ))).to_series()
    # what follows the first "iteration" (split, not sliced at str.find's offset: that
    # counts bytes, str.slice characters, and a non-ASCII prefix cost the step its digits)
    counter = pl.col("head").str.splitn("iteration", 2).struct.field("field_1") \
        .str.split_exact("/", 1)
    train = train.with_columns(values, failed=failed, counter=counter).unnest("counter")
    train = train.with_columns(
        step=pl.col("field_0").str.strip_chars().cast(pl.Int64, strict=False),
        total=pl.col("field_1").str.strip_chars().cast(pl.Int64, strict=False),
        wall_time=_stamp(train.get_column("head"))).drop("field_0", "field_1", "head")
    # a train line ends every field with " |": a "key: value" after the last one was cut
    # while it was written (its value may have lost digits)
    unended = (frame if every else frame.filter(is_train)).filter(
        ~text.str.strip_chars_end().str.ends_with("|"))  # few: the regex only looks at them
    cut = unended.filter(text.str.contains(r"\|[^|]*:[^|]*$")).get_column("line")
    train = train.with_columns(cut=pl.col("line").is_in(cut.implode())).with_columns(
        bad=pl.col("bad") | pl.col("failed") | pl.col("step").is_null() | pl.col("cut")
    ).drop("failed")
    if train.get_column("bad").any():  # their text, for the finding
        texts = frame.join(train.filter("bad").select("line"), on="line", how="semi")
        train = train.join(texts, on="line", how="left")
    rest = frame.clear() if every else frame.filter(~is_train)
    other = rest.filter(is_valid | text.str.contains(" ...", literal=True)
                        | text.str.contains("-- arguments --", literal=True)
                        | text.str.contains("loaded checkpoint", literal=True))
    return {"train": train, "other": other}


def _train_layout(data: bytes) -> Layout | None:
    """The layout of the chunk's first train line (:func:`_train_line_layout`)."""
    return _layout.first(data, b"iteration", _train_line_layout)


def _train_line_layout(sample: str) -> Layout | None:
    """The layout of a train line: its ``iteration N/ M`` as ``step`` and ``total``, the first
    timestamp of its head as ``wall_time``, each ``key: number`` field as its ``KEY + key``
    column (a number in a key is text); None for another line."""
    if "|" not in sample or "loss at " in sample:
        return None
    program: list[Piece] = []
    columns: list[str | None] = []
    field, colon, iteration, keys = 0, False, False, sample.split("|")
    for kind, text in _layout.pieces(sample):
        if kind == "lit":
            for char in text:
                field, colon = (field + 1, False) if char == "|" else (field, colon or char == ":")
            iteration = iteration or (field == 0 and "iteration" in text)
        elif kind == "ts":
            columns.append("wall_time" if field == 0 and "wall_time" not in columns else None)
        elif kind == "num" and field == 0:  # after "iteration": the step, then the total
            name = next((n for n in ("step", "total") if n not in columns), None) \
                if iteration else None
            kind = "int" if name else kind
            columns.append(name)
        elif kind == "num" and colon:
            key = KEY + keys[field].split(":", 1)[0].strip()
            if key in columns:
                return None  # two numbers in one field: not a layout of its own
            columns.append(key)
        elif kind == "num":
            kind = "lit"  # a number in a key
        program.append((kind, text))
    return _layout.checked(sample, program, columns, _train_rows)


def _train_rows(frame: pl.DataFrame) -> pl.DataFrame:
    return _parse(frame)["train"]


_STAMP = "%Y-%m-%d %H:%M:%S"


def _stamp(head: pl.Series) -> pl.Series:
    """Unix seconds of the ``[YYYY-MM-DD HH:MM:SS]`` a line starts with: the first bracket
    split out (fast), else searched for anywhere (a launcher's prefix before it)."""
    frame = head.to_frame("head")
    after = pl.col("head").str.splitn("[", 2).struct.field("field_1")  # split: see _parse
    inside = frame.select(after.str.splitn("]", 2).struct.field("field_0")).to_series()
    # whole seconds (the usual print) parse much faster without the fraction in the format
    whole = inside.str.len_bytes() == len("2024-03-01 09:00:08")
    formats = [_STAMP] if whole.all() else [_STAMP, _STAMP + "%.f"]
    parsed = [inside.str.to_datetime(f, time_unit="us", strict=False, cache=False)
              for f in formats]
    stamp = parsed[0] if len(parsed) == 1 else \
        pl.select(pl.when(whole).then(parsed[0]).otherwise(parsed[1])).to_series()
    fast: pl.Series = stamp.dt.epoch("us").cast(pl.Float64) / 1e6
    if fast.null_count() and frame.select(pl.col("head").str.contains("[", literal=True)
                                          .any()).item():
        fast = frame.select(timestamp(pl.col("head"))).to_series()
    return fast.alias("head")


def _assemble(path: Path, logs: list[Path], train: pl.DataFrame, other: pl.DataFrame,
              findings: list[Finding]) -> RawLog:
    """Points, legs and facts from the train rows and the other kept lines (both in file
    order: chunks come in order and keep their lines in order)."""
    if "text" not in train.columns:
        train = train.with_columns(text=pl.lit(None, pl.String))
    bad = train.filter("bad").select("line", "pos", "text")
    cut = pl.col("cut").fill_null(False) if "cut" in train.columns else pl.lit(False)
    if train.get_column("step").null_count() or train.select(cut.any()).item():
        train = train.filter(pl.col("step").is_not_null() & ~cut)  # a cut line gives nothing
    train = _legs(train.drop("text"), other)
    if train.is_empty():
        raise InputError(f"{path}: no Megatron-LM training line could be read (expected "
                         "' iteration N/ M | ... | lm loss: X |')")
    names = {column: _train_name(column[len(KEY):]) for column in train.columns
             if column.startswith(KEY)}
    scalars = to_raw(train, names)
    valid, bad_valid = _validation(other, train)
    scalars = pl.concat([scalars, valid])
    aliases = {m: c[len(KEY):] for c, m in names.items() if m != c[len(KEY):]}
    aliases.update({"eval/loss": "validation lm loss value", "eval/ppl": "validation lm loss PPL"})
    bad = pl.concat([bad, bad_valid]).sort("pos")
    finding = unparsed_finding(logs[0] if len(logs) == 1 else path, bad,
                                      "Megatron-LM log lines")
    findings += [finding] if finding else []
    config = _arguments(other)
    facts, more = _facts(logs, train, config)
    return RawLog(path=path, scalars=scalars, step_unit="optimizer",
                  facts=facts, findings=findings + more, files=logs, aliases=aliases,
                  leg_starts=_leg_starts(train, other),
                  hparams=hparams(config, where=f"{logs[0].name}: arguments"))


def _train_name(key: str) -> str:
    return _TRAIN_NAMES.get(key) or "train/" + re.sub(r"[^0-9a-z]+", "_", key.lower()).strip("_")


def _legs(train: pl.DataFrame, other: pl.DataFrame) -> pl.DataFrame:
    """``train`` with leg numbers: a new leg at an ``arguments`` banner (a relaunch) and where
    the iteration does not go up."""
    banners = other.filter(pl.col("text").str.contains("-- arguments --", literal=True))
    rows = train.select("pos", "step", launch=pl.lit(False), stepped=pl.lit(True))
    if banners.height:  # both in file order: a merge, not a sort of every train row
        rows = rows.set_sorted("pos").merge_sorted(
            banners.select("pos", step=pl.lit(None, pl.Int64), launch=pl.lit(True),
                           stepped=pl.lit(False)).set_sorted("pos"), key="pos")
    legs = rows.select(number_legs(rows, launch="launch", stepped="stepped"),
                       "stepped").filter("stepped")
    return train.with_columns(legs.get_column("leg"))


def _leg_starts(train: pl.DataFrame, other: pl.DataFrame) -> dict[int, int]:
    """Leg -> first step it may log, from ``loaded checkpoint ... at iteration K`` lines."""
    loaded = other.filter(pl.col("text").str.contains("loaded checkpoint", literal=True)).select(
        loaded_at="pos",
        start=pl.col("text").str.extract(_LOADED, 1).cast(pl.Int64, strict=False) + 1)
    loaded = loaded.filter(pl.col("start").is_not_null())
    if loaded.is_empty():
        return {}
    legs = train.group_by("leg").agg(first=pl.col("pos").first(), last=pl.col("pos").last())
    legs = legs.sort("leg").with_columns(previous=pl.col("last").shift(1))
    joined = legs.join_asof(loaded.sort("loaded_at"), left_on="first", right_on="loaded_at",
                            strategy="backward")
    joined = joined.filter(pl.col("loaded_at") > pl.col("previous"))
    return dict(joined.select("leg", "start").iter_rows())


def _validation(other: pl.DataFrame, train: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Points of ``validation loss at ...`` lines, and the lines not read in full."""
    rows = other.filter(pl.col("text").str.contains("loss at ", literal=True))
    parts = rows.with_columns(pl.col("text").str.extract_groups(_VALID).alias("v")).unnest("v")
    prefix = pl.when(pl.col("rest").str.contains("test")).then(pl.lit("test/")) \
        .otherwise(pl.lit("eval/"))
    last = train.select("pos", last_step="step", leg="leg")
    parts = parts.sort("pos").join_asof(last, on="pos", strategy="backward")
    pairs = (parts.with_columns(pair=pl.col("pairs").str.extract_all(r"[^|]+?(?:value|PPL):[^|]+"))
             .explode("pair").with_columns(
                 key=pl.col("pair").str.extract(r"^\s*(.*?)\s+(?:value|PPL):", 1),
                 ppl=pl.col("pair").str.contains("PPL:", literal=True),
                 value=pl.col("pair").str.extract(r":\s*(\S+)", 1).cast(pl.Float64, strict=False)))
    name = pl.col("key").str.to_lowercase().str.replace_all(r"[^0-9a-z]+", "_").str.strip_chars("_")
    name = pl.when(name == "lm_loss").then(pl.lit("loss")).otherwise(name)
    # the line's own step (none past 64 bits), else the last train line's
    at = pl.when(pl.col("step").is_null()).then("last_step") \
        .otherwise(pl.col("step").cast(pl.Int64, strict=False))
    read = pl.col("value").is_not_null() & pl.col("key").is_not_null() & at.is_not_null()
    points = pairs.filter(read).select(
        metric=prefix + name + pl.when("ppl").then(pl.lit("_ppl")).otherwise(pl.lit("")),
        value="value", step=at,
        wall_time=pl.lit(None, pl.Float64), leg=pl.col("leg").fill_null(0).cast(pl.Int32))
    points = points.with_columns(pl.col("metric").str.replace("/loss_ppl", "/ppl", literal=True))
    # a line none of whose pairs, or only some, gave a named number
    bad = parts.filter(pl.col("line").is_in(pairs.filter(~read).get_column("line").implode()))
    return points, bad.select("line", "pos", "text")


def _arguments(other: pl.DataFrame) -> dict[str, str]:
    """The ``key ... value`` lines of the first arguments banner, as printed."""
    args = other.filter(pl.col("text").str.contains(" ...", literal=True)).with_columns(
        pl.col("text").str.extract_groups(_ARG).alias("a")).unnest("a")
    args = args.filter(pl.col("key").is_not_null()).unique("key", keep="first",
                                                           maintain_order=True)
    return dict(args.select("key", "value").iter_rows())


def _facts(logs: list[Path], train: pl.DataFrame,
           config: dict[str, str]) -> tuple[dict[str, Fact[Any]], list[Finding]]:
    where = f"{logs[0].name}: arguments"
    facts = facts_from_config(config, where=where)
    findings = []
    ramp = config.get("rampup_batch_size")
    if ramp not in (None, "None"):
        findings.append(Finding("info", "batch-ramp", f"{where}: rampup_batch_size {ramp}: "
                                "the global batch grows during the run; the samples axis "
                                "comes from the logged consumed samples"))
    gb = KEY + "global batch size"
    if gb in train.columns:
        sizes = train.select("step", "name", "line", gb=pl.col(gb).cast(pl.Int64, strict=False))
        sizes = sizes.filter(pl.col("gb").is_not_null())
        if sizes.height:
            last = sizes.row(-1, named=True)
            facts.setdefault("global_batch", Fact(
                last["gb"], f"{last['name']}: global batch size (iteration {last['step']})"))
            changes = sizes.filter(pl.col("gb") != pl.col("gb").shift(1))
            if changes.height and not findings:
                first = sizes.row(0, named=True)
                findings.append(Finding(
                    "info", "batch-ramp",
                    f"{last['name']}: the global batch size went from {first['gb']} to "
                    f"{last['gb']} in {changes.height} change(s) (first at iteration "
                    f"{changes.row(0, named=True)['step']}); the samples axis comes from the "
                    "logged consumed samples"))
    total = train.get_column("total").drop_nulls()
    if total.len():
        facts.setdefault("max_steps", Fact(int(total[-1]), f"{logs[-1].name}: iteration N/M"))
    facts["global_step"] = Fact(int(train.get_column("step").max()),  # type: ignore[arg-type]
                                f"{logs[-1].name}: last iteration")
    findings += _skipped(logs, train, facts, config)
    return facts, findings


def _skipped(logs: list[Path], train: pl.DataFrame, facts: dict[str, Fact[Any]],
             config: dict[str, str]) -> list[Finding]:
    """The iterations skipped (an fp16 loss-scale overflow: no update, its batch consumed):
    ``number of skipped iterations`` counts those since the line before (Megatron resets it
    after each log line), so their sum over the last leg is the leg's count; a warning and
    the ``skipped_iterations`` fact when there are any."""
    column = KEY + "number of skipped iterations"
    if column not in train.columns:
        return []
    last = train.filter(pl.col("leg") == train.get_column("leg").max())
    counts = last.get_column(column).cast(pl.Float64, strict=False).drop_nulls()
    skipped = int(counts.sum())
    if skipped <= 0:
        return []
    steps = last.get_column("step")
    gaps = steps.diff().drop_nulls()
    interval = _int(config.get("log_interval")) or (int(gaps.min()) if gaps.len()  # type: ignore[arg-type]
                                                    else 1)
    first, end = int(steps.min()), int(steps.max())  # type: ignore[arg-type]
    covered = end - first + interval  # the first line counts the interval before it
    where = last.row(0, named=True)["name"]
    facts["skipped_iterations"] = Fact(
        skipped, f"{where}: sum of 'number of skipped iterations' (iterations "
        f"{first - interval + 1}-{end})", "logged")
    return [Finding(
        "warning", "skipped-iterations",
        f"{where}: {skipped:,} of the {covered:,} iterations logged ({first - interval + 1}-"
        f"{end}) were skipped (an fp16 loss-scale overflow: the optimizer made no update, yet "
        f"the batch was consumed); the step axis counts iterations, so {covered - skipped:,} "
        "updates were applied there, and samples and tokens include the skipped batches")]


def _int(value: str | None) -> int | None:
    """A whole number ≥ 1 printed in the arguments block, else None."""
    return int(value) if value is not None and value.isdigit() and int(value) >= 1 else None


FORMAT = Format(
    "megatron",
    "Megatron-LM stdout: ' iteration N/ M | consumed samples: ... | lm loss: ...' lines",
    read=read, claims=claims, printed=True)
