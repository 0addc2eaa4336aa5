"""What a reader must hand the loader: the checks :meth:`.format.Format.read_at` makes on every
:class:`~runcompare.model.RawLog` a format's ``read`` returns.

A reader owns turning its log into the model's terms: the step unit is one of
:data:`~runcompare.model.STEP_UNITS`, the points frame is exactly
:data:`~runcompare.model.RAW_SCHEMA` (columns, order and types), and every point has a metric,
a value (NaN and ±inf as logged), a whole step and a leg. A log's step that is not a whole
number (``1.5``) is bad input that only the reader can report well (it knows the line or record
and the fix, as the JSON-lines reader and ``--set step_metric`` for W&B do): a points frame
that still holds one, or any step that is not an ``Int64``, is a bug in that reader. So is
anything else here that does not hold; each is a :class:`~runcompare.errors.ReaderError` naming
the format, the file and what was wrong, never a truncated step or a ``KeyError`` further on.

The checks read column types and polars' stored null counts, make one vectorised pass over the
leg column, and one over a float step column only when there is one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ReaderError
from ..model import RAW_SCHEMA, STEP_UNITS, Fact, Finding, RawLog

if TYPE_CHECKING:
    import polars as pl

__all__ = ["check_raw"]

#: Columns of the points frame that may hold nulls (the others may not): a point's wall time
#: is unknown in many logs.
NULLABLE = frozenset({"wall_time"})


def check_raw(raw: object, fmt: str, path: Path) -> RawLog:
    """``raw`` when it is a :class:`RawLog` that keeps the contract; else a
    :class:`ReaderError` saying which format broke it, at which file, and how.

    >>> import polars as pl
    >>> from runcompare.model import RAW_SCHEMA
    >>> good = RawLog(path=Path("run"), scalars=pl.DataFrame(schema=RAW_SCHEMA))
    >>> check_raw(good, "text", Path("run")) is good
    True
    >>> check_raw(RawLog(path=Path("run"), scalars=good.scalars, step_unit="iterations"),
    ...           "text", Path("run"))
    Traceback (most recent call last):
    ...
    runcompare.errors.ReaderError: run: the text reader returned step unit 'iterations', not one of optimizer, micro, log_call, samples, tokens, epoch (a bug in runcompare's text reader; please report it with this log)
    """
    if not isinstance(raw, RawLog):
        raise _broken(fmt, path, None, f"a {type(raw).__name__}, not a RawLog")
    if raw.step_unit not in STEP_UNITS:
        raise _broken(fmt, path, raw, f"step unit {raw.step_unit!r}, not one of "
                      f"{', '.join(STEP_UNITS)}")
    problem = _scalars_problem(raw.scalars) or _fields_problem(raw)
    if problem is not None:
        raise _broken(fmt, path, raw, problem)
    return raw


def _scalars_problem(scalars: object) -> str | None:
    """What is wrong with a points frame, or None: not a polars frame, other columns than
    :data:`RAW_SCHEMA`'s (or in another order), another type, a null where none may be, a step
    that is not a whole number, a negative leg."""
    import polars as pl

    if not isinstance(scalars, pl.DataFrame):
        return f"points as a {type(scalars).__name__}, not a polars DataFrame"
    if scalars.columns != list(RAW_SCHEMA):
        return (f"points with columns {', '.join(scalars.columns) or '(none)'}, not "
                f"{', '.join(RAW_SCHEMA)}")
    step = scalars.get_column("step")
    if step.dtype.is_float():
        return _float_steps(step)
    for name, dtype in RAW_SCHEMA.items():
        column = scalars.get_column(name)
        if column.dtype != dtype:
            return f"a {name} column of {column.dtype}, not {dtype}"
        if name not in NULLABLE and column.null_count():
            return f"{column.null_count()} points without a {name}"
    negative = int((scalars.get_column("leg") < 0).sum())
    if negative:
        return f"{negative} points of a negative leg (legs count from 0)"
    return None


def _float_steps(step: pl.Series) -> str:
    """What to say of a step column of floats: whether its steps are whole numbers at all."""
    import polars as pl

    finite = step.drop_nulls()
    broken = finite.filter(~finite.is_finite() | (finite != finite.round()))
    if broken.is_empty():
        return (f"steps as {step.dtype} (whole numbers, but the points frame holds steps as "
                f"{pl.Int64})")
    return (f"{broken.len()} steps that are not whole numbers (the first: {broken[0]}); a "
            "reader reports such steps as bad lines or records, never truncates them")


def _fields_problem(raw: RawLog) -> str | None:
    """What is wrong with a RawLog's other fields, or None: facts and findings of the model's
    types under string keys, paths as paths, aliases and leg starts as their types say."""
    for label, facts in (("fact", raw.facts), ("hparam", raw.hparams)):
        bad = [key for key, fact in facts.items()
               if not isinstance(key, str) or not isinstance(fact, Fact)]
        if bad:
            return f"{label} {bad[0]!r} that is not a Fact under a name"
    if not all(isinstance(finding, Finding) for finding in raw.findings):
        return "a finding that is not a Finding"
    if not isinstance(raw.path, Path) or not all(isinstance(f, Path) for f in raw.files):
        return "a file that is not a Path"
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.aliases.items()):
        return "an alias that is not a name for a name"
    if not all(type(k) is int and type(v) is int for k, v in raw.leg_starts.items()):
        return "a leg start that is not a whole step of a leg"
    if raw.name is not None and not isinstance(raw.name, str):
        return f"a run name of {type(raw.name).__name__}"
    return None


def _broken(fmt: str, path: Path, raw: RawLog | None, problem: str) -> ReaderError:
    """The error for a reader that broke the contract, naming the file(s) it read."""
    files = raw.files if raw is not None and isinstance(raw.files, list) else []
    where = ", ".join(str(file) for file in files[:3]) if files else str(path)
    more = f" and {len(files) - 3} more" if len(files) > 3 else ""
    return ReaderError(f"{where}{more}: the {fmt} reader returned {problem} (a bug in "
                       f"runcompare's {fmt} reader; please report it with this log)")
