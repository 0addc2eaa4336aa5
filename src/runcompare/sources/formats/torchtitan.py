"""torchtitan stdout: ``[titan] <time> - root - INFO - step: N  loss: X  grad_norm: ...``.

ANSI colour codes are stripped; ``step`` counts optimizer steps (1-based, printed after the
step); the ``[titan]`` timestamp (read as UTC) is the wall time. Metric names (alias = the
printed name): ``loss`` -> ``train/loss``, ``grad_norm`` -> ``train/grad_norm``, ``memory:
30.12GiB(38.10%)`` -> ``train/memory_gib`` and ``train/memory_pct``, ``tps`` (tokens per
second per device; older versions print ``wps``) -> ``train/tps_per_device``, ``tflops`` ->
``train/tflops_per_device``, ``mfu`` -> ``train/mfu`` (percent; ``N/A`` is left out); any
other ``key: number`` -> ``train/<key>``; ``validate step: N  loss: X`` -> ``eval/loss``.

Facts (kind ``logged``) from the line that gives the batch: ``Trainer is initialized with local
batch size B, global batch size G, gradient accumulation steps A, sequence length L, total
steps T (warmup W).`` (current versions; older ones print it as ``Training starts at step S,
with local batch size B, ...``): per_device_batch, global_batch, grad_accum, seq_len, max_steps
(whichever the version prints; the last line wins). Legs: each ``Training starts at step S``
starts one, at step S, or after the step of the ``Loading the checkpoint at step N.`` line
printed before the leg's first step when that is later (versions that announce the start
before loading the checkpoint always say step 1).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from ...errors import InputError
from ...model import Fact, RawLog
from ..format import Format
from ..textlog.damage import unparsed_finding
from ..textlog.logs import logs_at
from ..textlog.points import number_legs
from ..textlog.rows import read_rows
from ..textlog.values import clean_text, number, timestamp

__all__ = ["FORMAT", "claims", "read"]


_TITAN = r"\[titan\] \d{4}-\d\d-\d\d"
_PAIR = r"[A-Za-z_][A-Za-z_ ]*?:\s+[^\s]+"
#: Lines that start a leg, and the facts of the batch line.
_LEGS = {"start": r"Training starts at step (\d+)",
         "checkpoint": r"Loading the checkpoint at step (\d+)"}
_BATCH = {"per_device_batch": r"local batch size (\d+)",
          "global_batch": r"global batch size (\d+)",
          "grad_accum": r"gradient accumulation steps (\d+)",
          "seq_len": r"sequence length (\d+)", "max_steps": r"total steps (\d+)"}
_STARTS = {**_LEGS, **_BATCH}
_NAMES = {"loss": "train/loss", "grad_norm": "train/grad_norm", "memory": "train/memory_gib",
          "tps": "train/tps_per_device", "wps": "train/tps_per_device",
          "tflops": "train/tflops_per_device", "mfu": "train/mfu"}


def claims(head: str) -> bool:
    """Whether a file's beginning holds torchtitan's ``[titan] <date>`` log lines."""
    return bool(re.search(_TITAN, head))



def read(path: Path, *, hints: Mapping[str, object] | None = None,
         claims: Callable[[str], bool] = claims) -> RawLog:
    """Every point of the torchtitan log(s) at ``path``."""
    logs = logs_at(path, claims, missing="no torchtitan log found (lines like '[titan] "
                          "2025-01-01 12:00:00,000 - root - INFO - step: 10  loss: 9.6123 ...')")
    rows, findings = read_rows(logs, _parse)
    rows = rows.sort("pos")
    rows = rows.with_columns(number_legs(rows, launch="launch", stepped="is_train"))
    pairs = (rows.filter(pl.col("step").is_not_null())
             .select("pos", "step", "wall_time", "leg", "is_train",
                     pair=pl.col("message").str.extract_all(_PAIR)).explode("pair"))
    pairs = pairs.with_columns(key=pl.col("pair").str.extract(r"^([^:]+):", 1).str.strip_chars(),
                               raw=pl.col("pair").str.extract(r":\s+(\S+)$", 1))
    pairs = pairs.filter(~pl.col("key").str.ends_with("step"))
    if pairs.is_empty():
        raise InputError(f"{path}: no torchtitan 'step: N  loss: X' line could be read")
    scalars, bad = _points(pairs)
    bad = pl.concat([bad, rows.filter("overflow").select("pos")])
    findings += [f for f in [unparsed_finding(logs[0], rows.join(bad, on="pos", how="semi")
                                                     .select("line", "text"), "torchtitan steps")]
                 if f]
    aliases = {m: k for k, m in _NAMES.items() if k != "wps"}
    aliases.update({"train/memory_pct": "memory (%)", "eval/loss": "validate loss"})
    return RawLog(path=path, scalars=scalars, step_unit="optimizer",
                  facts=_facts(rows, logs), findings=findings, files=logs, aliases=aliases,
                  leg_starts=_leg_starts(rows))


def _parse(frame: pl.DataFrame) -> pl.DataFrame:
    text = pl.col("text")
    rows = frame.filter(text.str.contains("[titan]", literal=True)).with_columns(
        text=clean_text(text))
    message = text.str.extract(r" - [A-Z]+ - (.*)$", 1)
    digits = message.str.extract(r"^(?:validate )?step:\s*(\d+)", 1)
    step = digits.cast(pl.Int64, strict=False)  # past 64 bits: no step, and the line is bad
    starts = {name: message.str.extract(pattern, 1).cast(pl.Int64, strict=False)
              for name, pattern in _STARTS.items()}
    out = rows.with_columns(message=message, step=step, wall_time=timestamp(text),
                            is_train=message.str.starts_with("step:"),
                            overflow=digits.is_not_null() & step.is_null(), **starts)
    out = out.with_columns(launch=pl.col("start").is_not_null())
    return out.filter(pl.col("step").is_not_null() | pl.col("overflow")
                      | pl.any_horizontal(pl.col(name).is_not_null() for name in _STARTS))


def _points(pairs: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """RAW rows of every ``key: value`` pair, and the rows whose values did not parse."""
    memory_pct = pl.col("raw").str.extract(r"\(([\d.]+)%\)", 1).cast(pl.Float64, strict=False)
    raw = pl.when(pl.col("key") == "memory").then(pl.col("raw").str.extract(r"^([\d.]+)", 1)) \
        .otherwise("raw")
    pairs = pairs.with_columns(value=number(raw), pct=memory_pct)
    name = pl.col("key").replace_strict(_NAMES, default=pl.lit("train/") + pl.col("key")
                                        .str.replace_all(" ", "_"), return_dtype=pl.String)
    name = pl.when(pl.col("is_train")).then(name).otherwise(
        pl.lit("eval/") + pl.col("key").str.replace_all(" ", "_"))
    name = pl.when(~pl.col("is_train") & (pl.col("key") == "memory")) \
        .then(pl.lit("eval/memory_gib")).otherwise(name)
    bad = pairs.filter(pl.col("value").is_null() & (pl.col("raw") != "N/A")).select("pos")
    main = pairs.select(metric=name, value="value", step="step", wall_time="wall_time", leg="leg")
    pct = pairs.filter(pl.col("pct").is_not_null()).select(
        metric=pl.when("is_train").then(pl.lit("train/memory_pct"))
        .otherwise(pl.lit("eval/memory_pct")), value="pct", step="step",
        wall_time="wall_time", leg="leg")
    scalars = pl.concat([main, pct]).filter(pl.col("value").is_not_null())
    return scalars.with_columns(pl.col("leg").cast(pl.Int32)), bad.unique()


def _facts(rows: pl.DataFrame, logs: list[Path]) -> dict[str, Fact[Any]]:
    facts: dict[str, Fact[Any]] = {}
    for name, pattern in _BATCH.items():
        found = rows.filter(pl.col(name).is_not_null()).tail(1)
        if found.height:
            words = pattern.split(" (", 1)[0]
            facts[name] = Fact(int(found[name][0]), f"{logs[-1].name} line {found['line'][0]}: "
                                                    f"{words}")
    steps = rows.filter("is_train").get_column("step")
    if steps.len():
        facts["global_step"] = Fact(int(steps.max()), f"{logs[-1].name}: last step")  # type: ignore[arg-type]
    return facts


def _leg_starts(rows: pl.DataFrame) -> dict[int, int]:
    """The first step of each restarted leg: its ``Training starts at step S``, or the step after
    the checkpoint it loaded when later (a checkpoint line belongs to the next leg's steps)."""
    upcoming = pl.when("is_train").then("leg").backward_fill()
    loaded = rows.select(leg=upcoming, start=pl.col("checkpoint") + 1).drop_nulls()
    announced = rows.filter("launch").select("leg", "start")
    starts = pl.concat([announced, loaded.cast(announced.schema)]).group_by("leg").agg(
        pl.col("start").max())
    return {leg: start for leg, start in starts.iter_rows() if leg > 0}


FORMAT = Format(
    "torchtitan",
    "torchtitan stdout: '[titan] <time> - root - INFO - step: N  loss: X ...' lines",
    read=read, claims=claims, printed=True)
