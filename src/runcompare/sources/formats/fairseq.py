"""fairseq training logs: ``fairseq-train`` stdout (``--log-file``) and hydra's ``train.log`` /
``hydra_train.log`` (``fairseq-hydra-train``).

Two line prefixes (fairseq's own logging format, and hydra's job logging):

- ``2021-03-01 12:00:00 | INFO | <tag> | <message>``
- ``[2022-04-08 18:48:05,372][<tag>][INFO] - <message>``

and two messages (``--log-format simple`` or ``json``), written by
``fairseq/logging/progress_bar.py`` under a logger renamed to the tag:

============ ============================================= ==================================
tag          simple                                        json
============ ============================================= ==================================
train_inner  ``epoch 001:    100 / 1000 loss=9.12, ...``   ``{"epoch": 1, "update": 0.416,
                                                           "loss": "9.276", ...}``
train        ``epoch 001 | loss 8.1 | ... | num_updates``  ``{"epoch": 1, "train_loss": ...}``
<subset>     ``epoch 001 | valid on 'valid' subset |       ``{"epoch": 1, "valid_loss": ...}``
             loss 8.1 | ...``
============ ============================================= ==================================

Steps: ``num_updates`` on every line, fairseq's count of optimizer updates applied (an fp16
overflow step is not counted: fairseq's trainer only increments it when the update was
applied), so step_unit is optimizer updates. The timestamp of the prefix (read as UTC) is the
wall time. Metric names (alias = the printed key):

- ``train_inner`` (averages over the log interval) -> ``train/<key>``; ``lr`` ->
  ``train/learning_rate``, ``gnorm`` -> ``train/grad_norm``; the json ``update`` (the epoch
  reached, fractional) and the simple ``N / M`` (as ``epoch - 1 + N / M``, fairseq's own
  formula) -> ``train/epoch``;
- ``train`` (the end-of-epoch averages over the whole epoch, printed after "end of epoch N
  (average epoch stats below)") -> ``train/epoch_<key>``: kept apart, not mixed into the
  interval averages of ``train/<key>`` (fairseq's TensorBoard writer keeps them apart too,
  under its ``train`` tag against ``train_inner``);
- the validation of subset ``valid`` -> ``eval/<key>``, of another subset S -> ``S/<key>``
  (json keys lose their ``<tag>_`` prefix).

Facts (kind ``logged``): ``global_step`` (the last ``num_updates``), ``world_size`` (``training
on N devices``), ``global_batch`` from ``bsz`` and ``tokens_per_step`` from ``wpb`` only when
every train_inner line of the last leg logs the same whole number (fairseq logs their averages
per interval: with token-based batching they vary, and an ``info`` finding says so instead).
Legs: a configuration dump (``Namespace(...)`` or hydra's ``{'_name': ...``) starts one, and so
does a ``num_updates`` that goes back; ``loaded checkpoint ... (epoch E @ U updates)`` makes
the next leg start at U + 1.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from ...errors import InputError
from ...model import Fact, Finding, RawLog
from ..format import Format
from ..textlog.damage import unparsed_finding
from ..textlog.logs import logs_at
from ..textlog.points import number_legs
from ..textlog.rows import read_rows
from ..textlog.values import number, timestamp

__all__ = ["FORMAT", "claims", "read"]


_STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)?"
_PLAIN = rf"^(?<ts>{_STAMP}) \| (?<level>[A-Z]+) \| (?<tag>[^|]+?) \| (?<msg>.*)$"
_HYDRA = rf"^\[(?<ts>{_STAMP})\]\[(?<tag>[^\]]+)\]\[(?<level>[A-Z]+)\] - (?<msg>.*)$"
_CLAIM = re.compile(r"^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \| [A-Z]+ \| "
                    r"(?:fairseq[\w.]*|train_inner) \| "
                    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\]\[(?:fairseq[\w.]*|train_inner)\]\[)",
                    re.MULTILINE)
#: The simple ``train_inner`` message and the simple ``print`` (train, validation) one.
_INNER = r"^epoch (?<epoch>\d+):\s+(?<done>\d+) / (?<total>\d+) (?<body>.*)$"
_PRINT = r"^epoch (?<epoch>\d+) \| (?:valid on '[^']*' subset \| )?(?<body>.*)$"
_DEVICES = r"^training on (\d+) devices"
_LOADED = r"^loaded checkpoint .* \(epoch \d+ @ (\d+) updates\)"
_TRAIN_NAMES = {"lr": "train/learning_rate", "gnorm": "train/grad_norm", "update": "train/epoch"}
#: Keys that are axes, not metrics.
_AXES = ("num_updates", "epoch")


def claims(head: str) -> bool:
    """Whether a file's beginning holds fairseq's log lines (``| INFO | fairseq_cli.train |``,
    ``[fairseq.trainer][INFO]``, ``| train_inner |``, ...)."""
    return bool(_CLAIM.search(head))


def read(path: Path, *, hints: Mapping[str, object] | None = None,
         claims: Callable[[str], bool] = claims) -> RawLog:
    """Every point of the fairseq log(s) at ``path``."""
    logs = logs_at(path, claims, missing="no fairseq log found (lines like '2021-03-01 "
                          "12:00:00 | INFO | train_inner | epoch 001:    100 / 1000 loss=9.12, "
                          "..., num_updates=100, ...')")
    rows, findings = read_rows(logs, _parse)
    rows = rows.sort("pos")
    pairs, bad = _pairs(rows.filter("stats"))
    steps = pairs.filter(pl.col("key") == "num_updates").group_by("pos").agg(
        step=pl.col("value").first().cast(pl.Int64, strict=False))
    unstepped = rows.filter("stats").join(steps.filter(pl.col("step").is_not_null()),
                                          on="pos", how="anti").select("pos")
    bad = pl.concat([bad, unstepped]).unique()
    rows = rows.join(steps, on="pos", how="left").with_columns(
        stepped=pl.col("stats") & pl.col("step").is_not_null()
        & ~pl.col("pos").is_in(bad.get_column("pos").implode()))
    # legs from the train_inner lines: a validation or epoch summary repeats their last step
    inner = pl.col("stepped") & (pl.col("tag") == "train_inner")
    rows = rows.with_columns(inner=inner)
    rows = rows.with_columns(number_legs(rows, launch="launch", stepped="inner",
                                                points="stepped"))
    points = pairs.join(rows.filter("stepped").select("pos", "step", "wall_time", "leg"),
                        on="pos").filter(~pl.col("key").is_in(_AXES))
    if points.is_empty():
        raise InputError(f"{path}: no fairseq train_inner, train or validation line with its "
                         "num_updates could be read")
    scalars = points.select(metric="metric", value="value", step="step",
                            wall_time="wall_time", leg=pl.col("leg").cast(pl.Int32))
    finding = unparsed_finding(logs[0] if len(logs) == 1 else path,
                                      rows.join(bad, on="pos", how="semi").select("line", "text"),
                                      "fairseq stats lines")
    findings += [finding] if finding else []
    facts, more = _facts(rows, points, logs)
    aliases = {m: k for m, k in points.select("metric", "key").unique().iter_rows() if m != k}
    return RawLog(path=path, scalars=scalars, step_unit="optimizer", facts=facts,
                  findings=findings + more, files=logs, aliases=aliases,
                  leg_starts=_leg_starts(rows))


def _parse(frame: pl.DataFrame) -> pl.DataFrame:
    """Per chunk: the lines of fairseq's logging (either prefix), as ``wall_time``, ``tag``,
    ``msg`` and what kind of line each is; other lines dropped."""
    text = pl.col("text")
    rows = frame.filter(text.str.contains(" | ", literal=True)
                        | text.str.contains("][", literal=True))
    plain = text.str.extract_groups(_PLAIN)
    hydra = text.str.extract_groups(_HYDRA)
    ts = pl.coalesce(plain.struct.field("ts"), hydra.struct.field("ts"))
    out = rows.with_columns(
        tag=pl.coalesce(plain.struct.field("tag"), hydra.struct.field("tag")),
        msg=pl.coalesce(plain.struct.field("msg"), hydra.struct.field("msg")),
        wall_time=timestamp(ts))
    msg = pl.col("msg")
    stats = msg.str.starts_with('{"epoch": ') | msg.str.contains(r"^epoch \d+(?::|\s\|)")
    out = out.filter(msg.is_not_null()).with_columns(
        stats=stats,
        launch=msg.str.starts_with("Namespace(") | msg.str.starts_with("{'_name': "),
        devices=msg.str.extract(_DEVICES, 1).cast(pl.Int64, strict=False),
        loaded=msg.str.extract(_LOADED, 1).cast(pl.Int64, strict=False),
        overflow=msg.str.starts_with("NOTE: gradient overflow detected")
        | msg.str.starts_with("NOTE: overflow detected"))
    keep = pl.col("stats") | pl.col("launch") | pl.col("devices").is_not_null() \
        | pl.col("loaded").is_not_null() | pl.col("overflow")
    return out.filter(keep)


def _pairs(stats: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One row per ``key``/``value`` of each stats line (``pos``, ``key``, ``metric``,
    ``value``), and the ``pos`` of the lines not read whole (a value that is no number, a
    json object cut before its ``}``)."""
    msg = pl.col("msg")
    is_json = msg.str.starts_with("{")
    inner = msg.str.extract_groups(_INNER)
    printed = msg.str.extract_groups(_PRINT)
    frame = stats.with_columns(
        is_json=is_json, cut=is_json & ~msg.str.strip_chars_end().str.ends_with("}"),
        inner_body=inner.struct.field("body"), print_body=printed.struct.field("body"),
        progress=(inner.struct.field("epoch").cast(pl.Float64) - 1
                  + inner.struct.field("done").cast(pl.Float64)
                  / inner.struct.field("total").cast(pl.Float64)))
    json_pairs = frame.filter("is_json").select(
        "pos", "tag", "cut", pair=msg.str.extract_all(r'"[^"]+": (?:"[^"]*"|[^,}]+)')).explode(
        "pair").select("pos", "tag", "cut",
                       key=pl.col("pair").str.extract(r'^"([^"]+)"', 1),
                       raw=pl.col("pair").str.extract(r'^"[^"]+": (.*)$', 1))
    # json ``print`` lines prefix every key with the tag: ``valid_loss``
    prefix = pl.col("tag") + "_"
    json_pairs = json_pairs.with_columns(key=pl.when(
        (pl.col("tag") != "train_inner") & pl.col("key").str.starts_with(prefix))
        .then(pl.col("key").str.slice(prefix.str.len_chars())).otherwise("key"))
    simple = frame.filter(~pl.col("is_json"))
    inner_pairs = simple.filter(pl.col("inner_body").is_not_null()).select(
        "pos", "tag", "cut", pair=pl.col("inner_body").str.split(", ")).explode("pair").select(
        "pos", "tag", "cut", key=pl.col("pair").str.extract(r"^([^=\s]+)=", 1),
        raw=pl.col("pair").str.extract(r"^[^=\s]+=(.*)$", 1))
    progress = simple.filter(pl.col("progress").is_not_null()).select(
        "pos", "tag", "cut", key=pl.lit("update"), raw=pl.col("progress").cast(pl.String))
    print_pairs = simple.filter(pl.col("inner_body").is_null()
                                & pl.col("print_body").is_not_null()).select(
        "pos", "tag", "cut", pair=pl.col("print_body").str.split(" | ")).explode("pair").select(
        "pos", "tag", "cut", key=pl.col("pair").str.extract(r"^(\S+) ", 1),
        raw=pl.col("pair").str.extract(r"^\S+ (.*)$", 1))
    pairs = pl.concat([json_pairs, inner_pairs, progress, print_pairs])
    pairs = pairs.with_columns(value=number(pl.col("raw")))
    broken = pairs.filter(pl.col("cut") | pl.col("key").is_null()
                          | (pl.col("value").is_null() & ~pl.col("raw").is_in(["null", '""'])))
    bad = pl.concat([broken.select("pos"),
                     frame.filter(~pl.col("is_json") & pl.col("inner_body").is_null()
                                  & pl.col("print_body").is_null()).select("pos")]).unique()
    pairs = pairs.filter(~pl.col("pos").is_in(bad.get_column("pos").implode())
                         & pl.col("value").is_not_null())
    return pairs.with_columns(metric=_metric(pl.col("tag"), pl.col("key"))) \
        .select("pos", "key", "metric", "value"), bad


def _metric(tag: pl.Expr, key: pl.Expr) -> pl.Expr:
    """The canonical name of ``key`` on a line of ``tag`` (see the module's docstring)."""
    inner = key.replace_strict(_TRAIN_NAMES, default=pl.lit("train/") + key,
                               return_dtype=pl.String)
    return (pl.when(tag == "train_inner").then(inner)
            .when(tag == "train").then(pl.lit("train/epoch_") + key)
            .when(tag == "valid").then(pl.lit("eval/") + key)
            .otherwise(tag + "/" + key))


def _facts(rows: pl.DataFrame, points: pl.DataFrame,
           logs: list[Path]) -> tuple[dict[str, Fact[Any]], list[Finding]]:
    where = logs[-1].name
    facts: dict[str, Fact[Any]] = {}
    findings: list[Finding] = []
    last = int(rows.filter("stepped").get_column("step").max())  # type: ignore[arg-type]
    facts["global_step"] = Fact(last, f"{where}: last num_updates")
    devices = rows.filter(pl.col("devices").is_not_null()).tail(1)
    if devices.height:
        facts["world_size"] = Fact(int(devices["devices"][0]),
                                   f"{where} line {devices['line'][0]}: training on N devices")
    final = points.filter(pl.col("leg") == points.get_column("leg").max())
    for key, fact, words in (("bsz", "global_batch", "sentences"),
                             ("wpb", "tokens_per_step", "tokens")):
        logged = final.filter(pl.col("metric") == f"train/{key}").get_column("value")
        if not logged.len():
            continue
        low, high = float(logged.min()), float(logged.max())  # type: ignore[arg-type]
        if low == high and low.is_integer() and low > 0:
            facts[fact] = Fact(int(low), f"{where}: {key} ({words} per update), "
                                         "the same on every train_inner line")
        else:
            findings.append(Finding(
                "info", "batch-varies",
                f"{where}: {key} ({words} per update, averaged over each log interval) varies "
                f"from {low:g} to {high:g} (batches made by token count): no {fact} fact; "
                f"train/{key} holds what was logged"))
    overflows = int(rows.get_column("overflow").sum())
    if overflows:
        findings.append(Finding(
            "info", "fp16-overflow",
            f"{where}: {overflows} fp16 gradient overflow{'s' * (overflows != 1)} "
            "(the update was skipped and not counted in num_updates, so the step axis counts "
            "updates applied; the skipped batches were still read)"))
    return facts, findings


def _leg_starts(rows: pl.DataFrame) -> dict[int, int]:
    """The first step of each restarted leg: the update after the checkpoint it loaded
    (``loaded checkpoint ... (epoch E @ U updates)``, printed before the leg's first line)."""
    upcoming = pl.when("inner").then("leg").backward_fill()
    loaded = rows.select(leg=upcoming, start=pl.col("loaded") + 1).drop_nulls()
    starts = loaded.group_by("leg").agg(pl.col("start").max())
    return {int(leg): int(start) for leg, start in starts.iter_rows() if leg > 0}


FORMAT = Format(
    "fairseq",
    "fairseq-train logs: '... | INFO | train_inner | epoch 001:  100 / 1000 loss=...' or "
    "'[...][train_inner][INFO] - {\"epoch\": 1, ...}' lines",
    read=read, claims=claims, printed=True)
