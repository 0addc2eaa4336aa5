"""nanoGPT's train.py stdout: ``iter N: loss X, time Yms, mfu Z%`` and
``step N: train loss X, val loss Y`` lines.

Steps are optimizer updates done, the unit of every other source: ``iter N`` is printed after
the (N + 1)-th update (nanoGPT counts from 0), so it is step N + 1; ``step N`` evaluations run
before update N + 1, so they are step N. Metric names (alias = the printed name):

=======================  ==========================================================
``iter N: loss``         ``train/loss`` (the last micro-batch's loss × accumulation)
``time ...ms``           ``train/iteration_time_ms``
``mfu ...%``             ``train/mfu`` (percent; the ``-100.00%`` of the first
                         iterations means "not measured yet" and is left out)
``step N: val loss``     ``eval/loss``
``step N: train loss``   ``eval/train_loss`` (estimated on ``eval_iters`` batches)
=======================  ==========================================================

Facts: ``tokens per iteration will be: N`` (kind ``logged``) -> tokens_per_step; ``batch_size``
(the micro-batch) and ``block_size`` (-> seq_len), ``max_iters``, ``eval_interval``,
``log_interval`` from the printed config file and ``Overriding: key = value`` lines (kind
``config``). ``gradient_accumulation_steps`` there is the total over all processes (train.py
divides it by the world size), so it is not reported as grad_accum.
Legs: each ``Initializing a new model from scratch`` / ``Resuming training from`` starts one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from ...errors import InputError
from ...facts import facts_from_config
from ...model import Fact, RawLog
from ..config import hparams
from ..format import Format
from ..textlog import layout as _layout
from ..textlog.damage import unparsed_finding
from ..textlog.layout import Layout, Piece
from ..textlog.logs import logs_at
from ..textlog.points import number_legs, to_raw
from ..textlog.rows import read_rows
from ..textlog.values import number

__all__ = ["FORMAT", "claims", "read"]


#: A unit word may follow a loss (forks print ``loss 4.5735 BPC``).
_UNIT = r"(?: [A-Za-z]+)?"
#: The spaces before a number are one or more (as the native scanner's layouts take them).
_ITER = (rf"^iter +(?<step>\d+): loss +(?<loss>[^\s,]+){_UNIT}, time +(?<time>\S+?)ms"
         r"(?:, mfu +(?<mfu>\S+?)%)?")
_EVAL = (rf"^step +(?<step>\d+): train loss +(?<train>[^\s,]+){_UNIT}, "
         r"val loss +(?<val>[^\s,]+)")
_CONFIG = r"^(?:Overriding: )?(?<key>[a-z_][a-z0-9_]*) = (?<value>[^#]*?)\s*(?:#.*)?$"
#: The line that states the tokens of an iteration (the older train.py printed the second).
_TOKENS = r"(?:tokens per iteration will be|total number of tokens per iteration): ([\d,]+)"
_CLAIM = re.compile(r"^(?:iter \d+: loss [\d.]+(?: [A-Za-z]+)?, time|step \d+: train loss)"
                    r"|^total number of tokens per iteration:", re.MULTILINE)
_LAUNCH = ("Initializing a new model from scratch", "Resuming training from",
           "Initializing from OpenAI GPT-2 weights")
#: Config keys reported as facts (nanoGPT name -> facts.CONFIG_KEYS key).
_CONFIG_KEYS = {"batch_size": "per_device_batch", "block_size": "seq_len",
                "max_iters": "max_steps", "log_interval": "logging_steps",
                "eval_interval": "eval_steps", "learning_rate": "learning_rate"}
_NAMES = {"loss": "train/loss", "time": "train/iteration_time_ms", "mfu": "train/mfu",
          "val": "eval/loss", "train": "eval/train_loss"}
_ALIASES = {"train/loss": "iter loss", "train/iteration_time_ms": "time",
            "train/mfu": "mfu", "eval/loss": "val loss", "eval/train_loss": "train loss"}


def claims(head: str) -> bool:
    """Whether a file's beginning looks like nanoGPT's train.py output."""
    return "tokens per iteration will be:" in head or bool(_CLAIM.search(head))



def read(path: Path, *, hints: Mapping[str, object] | None = None,
         claims: Callable[[str], bool] = claims) -> RawLog:
    """Every point of the nanoGPT log(s) at ``path``."""
    logs = logs_at(path, claims, missing="no nanoGPT log found (lines like 'iter 100: "
                          "loss 4.2134, time 120.00ms, mfu 30.00%')")
    rows, findings = read_rows(logs, _parse, layout=_iter_layout)
    rows = rows.sort("pos")
    rows = rows.with_columns(number_legs(rows, launch="launch", stepped="is_iter"))
    points = rows.filter(pl.col("step").is_not_null())
    if points.is_empty():
        raise InputError(f"{path}: no nanoGPT 'iter N: loss ...' or 'step N: ...' line could "
                         "be read")
    points = points.with_columns(step=pl.col("step") + pl.col("is_iter").cast(pl.Int64),
                                 wall_time=pl.lit(None, pl.Float64),
                                 mfu=pl.when(pl.col("mfu") > -100).then("mfu"))
    scalars = to_raw(points, _NAMES)
    bad = rows.filter(pl.col("bad")).select("line", "text")
    finding = unparsed_finding(logs[0], bad, "nanoGPT iter/step lines")
    return RawLog(path=path, scalars=scalars, step_unit="optimizer",
                  facts=_facts(rows, logs), findings=findings + ([finding] if finding else []),
                  files=logs, aliases=_ALIASES, hparams=_hparams(rows, logs))


def _parse(frame: pl.DataFrame) -> pl.DataFrame:
    text = pl.col("text").str.strip_chars_end()
    is_iter = text.str.starts_with("iter ")
    is_eval = text.str.starts_with("step ") & text.str.contains("loss", literal=True)
    launch = pl.any_horizontal(*(text.str.starts_with(marker) for marker in _LAUNCH))
    config = text.str.contains(" = ", literal=True) | text.str.contains("tokens per iter",
                                                                          literal=True)
    rows = frame.filter(is_iter | is_eval | launch | config)
    it = text.str.extract_groups(_ITER)
    ev = text.str.extract_groups(_EVAL)
    # a step past 64 bits is no step: the line is bad, not the whole log unreadable
    step = pl.coalesce(it.struct.field("step"), ev.struct.field("step")).cast(pl.Int64,
                                                                                strict=False)
    out = rows.with_columns(
        is_iter=is_iter, launch=launch, step=step,
        loss=number(it.struct.field("loss")), time=number(it.struct.field("time")),
        mfu=number(it.struct.field("mfu")), train=number(ev.struct.field("train")),
        val=number(ev.struct.field("val")),
        config=text.str.extract_groups(_CONFIG), tokens=text.str.extract(_TOKENS, 1))
    failed = (is_iter & pl.col("loss").is_null()) | (is_eval & pl.col("val").is_null())
    return out.with_columns(bad=failed | ((is_iter | is_eval) & step.is_null())).with_columns(
        text=pl.when("bad").then("text")).unnest("config")


#: The word before each number of an ``iter`` line -> its column.
_ITER_COLUMNS = {"iter": "step", "loss": "loss", "time": "time", "mfu": "mfu"}


def _iter_layout(data: bytes) -> Layout | None:
    """The layout of the chunk's first ``iter N: loss X, time Yms, mfu Z%`` line: each number
    the column of the word before it."""
    return _layout.first(data, b"iter ", _iter_line_layout)


def _iter_line_layout(sample: str) -> Layout | None:
    if not sample.startswith("iter "):
        return None
    program: list[Piece] = []
    columns: list[str | None] = []
    word = ""
    for kind, text in _layout.pieces(sample):
        if kind == "lit":
            words = re.findall(r"[a-z]+", text)
            word = words[-1] if words else word
        elif kind == "num":
            columns.append(_ITER_COLUMNS.get(word))
            kind = "int" if columns[-1] == "step" else kind
        program.append((kind, text))
    if None in columns or len(set(columns)) != len(columns):
        return None
    return _layout.checked(sample, program, columns, _parse)


def _config(rows: pl.DataFrame) -> dict[str, str]:
    """The config values the log printed (the last of a key printed twice), quotes removed."""
    config = rows.filter(pl.col("key").is_not_null()).unique("key", keep="last",
                                                             maintain_order=True)
    return {key: value.strip("'\"") for key, value in config.select("key", "value").iter_rows()}


def _hparams(rows: pl.DataFrame, logs: list[Path]) -> dict[str, Fact[Any]]:
    return hparams(_config(rows), where=f"{logs[0].name}: config")


def _facts(rows: pl.DataFrame, logs: list[Path]) -> dict[str, Fact[Any]]:
    where = logs[0].name
    values = _config(rows)
    facts: dict[str, Fact[Any]] = {}
    for key, name in _CONFIG_KEYS.items():
        found = facts_from_config({name: values.get(key)}, where="")
        if name in found:
            facts[name] = replace(found[name], source=f"{where}: config {key}")
    tokens = rows.get_column("tokens").drop_nulls()
    if tokens.len():
        facts["tokens_per_step"] = Fact(int(tokens[0].replace(",", "")),
                                        f"{where}: tokens per iteration will be")
    last = rows.filter("is_iter").get_column("step").max()
    if last is not None:  # none when the only iter line was cut before its number
        facts["global_step"] = Fact(int(last) + 1,  # type: ignore[arg-type]
                                    f"{where}: last iter + 1")
    return facts


FORMAT = Format(
    "nanogpt",
    "nanoGPT stdout: 'iter N: loss X, time Yms, mfu Z%' and 'step N: train loss X, val loss Y' "
    "lines",
    read=read, claims=claims, printed=True)
