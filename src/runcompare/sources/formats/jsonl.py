"""JSON-lines metric logs of hand-written training loops: one object per line,
``{"step": 10, "loss": 2.31, "lr": 3e-4}``.

The step is the line's ``step``, ``global_step``, ``iter`` or ``iteration`` (the first of them
it has; a whole number); every other numeric value is a metric, named like a printed key
(:data:`~runcompare.sources.naming.PRINTED`: ``loss`` -> ``train/loss``, ``lr`` ->
``train/learning_rate``, ``val_loss`` -> ``eval/loss``), nested objects flattened with ``/``
(``{"eval": {"loss": 2.1}}`` -> ``eval/loss``). ``NaN`` and ``Infinity``, which Python's
``json.dumps`` writes, are kept. ``wall_time``, ``timestamp`` or ``_timestamp`` holding unix
seconds is the wall time. Strings, lists and booleans are not metrics. A log with no step at
all is numbered by line (step unit ``log_call``, with a warning); a step that goes back starts
a new leg (a restart), and ``legs.resolve_legs`` decides which points survive.

Damage: a JSON object is whole only when it closes, so a line that does not parse (a cut last
line, a torn write) is never a point: it is reported (``damaged-input`` for a cut last line,
``unparsed-lines`` for others) and the lines around it are read. Lines that are not objects
(other prints mixed in) are passed over.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from ...errors import InputError
from ...model import Finding, RawLog
from ..format import Format
from ..naming import PRINTED, canonical_names
from ..textlog.damage import unparsed_finding
from ..textlog.lines import read_lines
from ..textlog.logs import logs_at
from ..textlog.points import number_legs, to_raw

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

__all__ = ["FORMAT", "claims", "read"]

STEP_KEYS = ("step", "global_step", "iter", "iteration")
TIME_KEYS = ("wall_time", "timestamp", "_timestamp")
#: Prefix of a flattened key's column in the parsed rows.
KEY = "k:"
#: Lines of a file's beginning that must parse as objects for the file to be claimed.
_CLAIM_LINES = 2


def claims(head: str) -> bool:
    """Whether a file's first lines that hold anything are JSON objects with a number in
    each (the last line of the head may be cut: it is not looked at)."""
    found = [line.strip() for line in head.splitlines()[:-1] if line.strip()][:_CLAIM_LINES]
    if not found or len(found) < min(_CLAIM_LINES, len(head.splitlines()) - 1):
        return False
    return all(_is_record(line) for line in found)


def _is_record(line: str) -> bool:
    if not line.startswith("{"):
        return False
    try:
        value = json.loads(line)
    except ValueError:
        return False
    # formats of their own: LLaMA-Factory's trainer_log.jsonl (current_steps, total_steps), and
    # W&B history from the API (_step beside _runtime or _timestamp: wandb-export reads it)
    return isinstance(value, dict) and bool(_numbers(value)) \
        and not {"current_steps", "total_steps"} <= value.keys() \
        and not ("_step" in value and not {"_runtime", "_timestamp"}.isdisjoint(value))


def read(path: Path, *, hints: Mapping[str, object] | None = None,
         claims: Callable[[str], bool] = claims) -> RawLog:
    """Every point of the JSON-lines log(s) at ``path``."""
    logs = logs_at(path, claims, missing="no JSON-lines metric log found (one object "
                          "per line, e.g. {\"step\": 10, \"loss\": 2.31})")
    values, bad, findings = [], [], []
    for index, file in enumerate(logs):
        lines = read_lines(file, _parse)
        where = {"pos": pl.col("line") + (index << 40)}
        values.append(lines.tables["values"].with_columns(**where))
        broken = lines.tables["bad"]
        if lines.unterminated is not None and lines.unterminated in broken["line"]:
            broken = broken.filter(pl.col("line") != lines.unterminated)
            findings.append(Finding("warning", "damaged-input",
                                    f"{file}: line {lines.unterminated} is cut off (the file "
                                    "ends inside a JSON object, as when a run is killed while "
                                    "writing); dropped it"))
        bad.append(broken.with_columns(file=pl.lit(str(file))))
        findings += lines.findings(file)
    return _assemble(path, logs, pl.concat(values, how="diagonal_relaxed"), pl.concat(bad),
                     findings)


def _parse(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per chunk: the flattened numbers of each object line (a column per key), and the
    lines that start an object but do not parse."""
    text = pl.col("text").str.strip_chars()
    objects = frame.filter(text.str.starts_with("{")).with_columns(text)
    try:  # the fast way, when every line is standard JSON
        rows = objects.get_column("text").str.json_decode(infer_schema_length=None)
        return {"values": _flat(objects.select("line", row=rows)), "bad": objects.clear()}
    except pl.exceptions.PolarsError:  # NaN, a cut line, a torn write: line by line
        return _parse_each(objects)


def _flat(decoded: pl.DataFrame) -> pl.DataFrame:
    """``line`` and one Float64 column per numeric leaf of the ``row`` structs."""
    columns: dict[str, pl.Expr] = {}

    def walk(expr: pl.Expr, dtype: PolarsDataType, key: str) -> None:
        if isinstance(dtype, pl.Struct):
            for inner in dtype.fields:
                walk(expr.struct.field(inner.name), inner.dtype,
                     f"{key}/{inner.name}" if key else inner.name)
        elif dtype.is_numeric():
            columns[KEY + key] = expr.cast(pl.Float64)

    walk(pl.col("row"), decoded.schema["row"], "")
    return decoded.select("line", **columns)


def _parse_each(objects: pl.DataFrame) -> dict[str, pl.DataFrame]:
    rows: list[dict[str, Any]] = []
    bad: list[int] = []
    for line, text in objects.iter_rows():
        try:
            value = json.loads(text)
        except ValueError:
            bad.append(line)
            continue
        if isinstance(value, dict):
            rows.append({"line": line, **{KEY + k: v for k, v in _numbers(value).items()}})
    schema = {"line": pl.Int64, **{k: pl.Float64 for row in rows for k in row if k != "line"}}
    values = pl.DataFrame(rows, schema=schema)
    return {"values": values,
            "bad": objects.filter(pl.col("line").is_in(bad))}


def _numbers(value: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric leaves of a decoded object by ``/``-joined key (booleans are not numbers).

    >>> _numbers({"step": 3, "eval": {"loss": 2.5, "note": "x"}, "ok": True})
    {'step': 3.0, 'eval/loss': 2.5}
    """
    out: dict[str, float] = {}
    for key, item in value.items():
        if isinstance(item, dict):
            out.update(_numbers(item, f"{prefix}{key}/"))
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            out[f"{prefix}{key}"] = float(item)
    return out


def _assemble(path: Path, logs: list[Path], values: pl.DataFrame, bad: pl.DataFrame,
              findings: list[Finding]) -> RawLog:
    keys = [c[len(KEY):] for c in values.columns if c.startswith(KEY)]
    steps = [KEY + k for k in STEP_KEYS if k in keys]
    times = [KEY + k for k in TIME_KEYS if k in keys]
    metrics = [k for k in keys if KEY + k not in steps + times]
    if values.is_empty() or not metrics:
        raise InputError(f"{path}: no JSON line held a number to plot (expected lines like "
                         "{\"step\": 10, \"loss\": 2.31})")
    step = pl.coalesce(steps) if steps else pl.lit(None, pl.Float64)
    wall = pl.coalesce(times) if times else pl.lit(None, pl.Float64)
    rows = values.sort("pos").with_columns(
        step=pl.when(step == step.round()).then(step).cast(pl.Int64, strict=False),
        wall_time=pl.when(wall > 1e8).then(wall))
    unit = "optimizer"
    if not steps:
        unit = "log_call"
        rows = rows.with_columns(step=pl.col("pos").rank("dense").cast(pl.Int64))
        findings.append(Finding("warning", "step-is-log-call",
                                f"{path}: no line has a step ({', '.join(STEP_KEYS)}); points "
                                "are numbered by line"))
    no_step = rows.filter(pl.col("step").is_null())
    rows = rows.filter(pl.col("step").is_not_null())
    # a step logged again on the next line (an eval object after the train one) is no restart
    marks = rows.select("step", launch=pl.lit(False),
                        stepped=(pl.col("step") != pl.col("step").shift(1)).fill_null(True))
    rows = rows.with_columns(number_legs(marks, launch="launch", stepped="stepped"))
    names = canonical_names(metrics, PRINTED)
    scalars = to_raw(rows, {KEY + k: names[k] for k in metrics})
    bad = pl.concat([bad.select("line", "text"),
                     values.join(no_step.select("pos"), on="pos", how="semi")
                     .select("line", text=pl.lit("(a step that is not a whole number)"))])
    finding = unparsed_finding(logs[0] if len(logs) == 1 else path, bad,
                                      "JSON-lines records")
    return RawLog(path=path, scalars=scalars, step_unit=unit,
                  findings=findings + ([finding] if finding else []), files=logs,
                  aliases={m: k for k, m in names.items() if m != k})


FORMAT = Format(
    "jsonl",
    "JSON-lines metric logs: one object per line with a step and numbers "
    "({\"step\": 10, \"loss\": 2.31})",
    read=read, claims=claims)
