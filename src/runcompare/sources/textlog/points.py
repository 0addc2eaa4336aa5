"""A text format's rows to points: leg numbers where a run restarted (:func:`number_legs`),
and the long :data:`~runcompare.model.RAW_SCHEMA` frame of a wide one (:func:`to_raw`).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from ...model import RAW_SCHEMA

__all__ = ["number_legs", "to_raw"]


def number_legs(rows: pl.DataFrame, *, launch: str, stepped: str, step: str = "step",
                points: str | None = None) -> pl.Series:
    """Leg numbers (0, 1, ...) of ``rows`` (in file order), Int32.

    A new leg starts at a row where the boolean column ``launch`` is true (the banner a
    trainer prints when it starts) and at a ``stepped`` row whose ``step`` does not go up
    from the previous stepped row's without a launch in between (a restart that went back to
    a checkpoint). Numbers start at 0 at the first ``points`` row (default: ``stepped``).

    >>> rows = pl.DataFrame({"launch": [1, 0, 0, 0, 1, 0, 0, 0], "stepped": [0, 1, 1, 1, 0, 1, 1, 1],
    ...                      "step": [None, 1, 2, 3, None, 2, 3, 1]}).cast({"launch": bool,
    ...                                                                   "stepped": bool})
    >>> number_legs(rows, launch="launch", stepped="stepped").to_list()
    [0, 0, 0, 0, 1, 1, 1, 2]
    """
    launch_, stepped_ = pl.col(launch), pl.col(stepped)
    launches = launch_.cast(pl.Int64).cum_sum()
    previous = pl.when(stepped_).then(pl.col(step)).forward_fill().shift(1)
    launches_before = pl.when(stepped_).then(launches).forward_fill().shift(1)
    back = stepped_ & (pl.col(step) <= previous) & (launches == launches_before)
    raw = rows.select((launch_ | back.fill_null(False)).cast(pl.Int32).cum_sum()).to_series()
    origin = raw.filter(rows.get_column(points or stepped)).min()
    legs: pl.Series = (raw - (origin or 0)).clip(lower_bound=0).cast(pl.Int32).alias("leg")
    return legs


def to_raw(frame: pl.DataFrame, columns: Mapping[str, str]) -> pl.DataFrame:
    """Long :data:`RAW_SCHEMA` rows from a wide frame with ``step``, ``wall_time`` and ``leg``
    columns: one row per non-null value of each column in ``columns`` (column -> metric).
    """
    present = {c: m for c, m in columns.items() if c in frame.columns}
    if not present or frame.is_empty():
        return pl.DataFrame(schema=RAW_SCHEMA)
    # columns of one chunk each: a select over columns cut into chunks at different rows
    # (a log's chunks, and a leg column computed whole) would realign them for every metric
    frame = frame.select("step", "wall_time", "leg", *present).rechunk()
    axes = [pl.col("step").cast(pl.Int64), pl.col("wall_time").cast(pl.Float64),
            pl.col("leg").cast(pl.Int32)]
    metrics: dict[str, list[str]] = {}
    for column, metric in present.items():
        metrics.setdefault(metric, []).append(column)
    parts = []
    for metric, names in metrics.items():
        part = frame.select(*axes, metric=pl.lit(metric, pl.String),
                            value=pl.coalesce(names).cast(pl.Float64))
        # a column logged on every line has no nulls: no filtering copy of the axes then
        parts.append(part.filter(pl.col("value").is_not_null())
                     if part.get_column("value").null_count() else part)
    # one part per metric, not copied into one block: the points are the memory a log costs
    return pl.concat(parts, rechunk=False).select(*RAW_SCHEMA)
