"""Printed text to values, as polars expressions for a format's vectorised parser: numbers
(thousands commas, units), timestamps, ANSI codes left out, tqdm's ``\\r`` redraws split.
"""

from __future__ import annotations

import polars as pl

__all__ = ["clean_text", "number", "split_cr", "timestamp"]

#: An ANSI colour or cursor code.
_ANSI = r"\x1b\[[0-9;?]*[A-Za-z]"


def split_cr(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per ``\\r``-separated segment of each line (tqdm redraws), line numbers kept."""
    return (frame.with_columns(pl.col("text").str.split("\r")).explode("text")
            .filter(pl.col("text").str.len_bytes() > 0))


def clean_text(text: pl.Expr) -> pl.Expr:
    """``text`` without ANSI colour and cursor codes."""
    return text.str.replace_all(_ANSI, "")


def number(text: pl.Expr) -> pl.Expr:
    """A printed number as Float64: thousands commas, quotes, spaces and a unit suffix
    (``%``, ``ms``, ``GiB``, ...) dropped; ``nan`` and ``inf`` kept; anything else null.

    >>> s = pl.Series(["1,234", " '2.346' ", "30.12GiB", "-1.5E-04", "nan", "N/A", "120.00ms"])
    >>> pl.select(number(pl.lit(s))).to_series().to_list()
    [1234.0, 2.346, 30.12, -0.00015, nan, None, 120.0]
    """
    cleaned = text.str.strip_chars(" '\"").str.replace_all(",", "", literal=True)
    value = cleaned.str.extract(r"^([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"
                                r"|(?i:nan|inf|infinity)))(?:[A-Za-z%/]*)$", 1)
    return value.cast(pl.Float64, strict=False)


def timestamp(text: pl.Expr) -> pl.Expr:
    """Unix seconds of an ``YYYY-MM-DD HH:MM:SS[.ffffff|,mmm]`` stamp read as UTC (the log
    says no zone), null when ``text`` holds none.

    >>> pl.select(timestamp(pl.lit("2024-01-24 10:00:00.5"))).item()
    1706090400.5
    """
    stamp = text.str.extract(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?", 0)
    parsed = stamp.str.replace(",", ".", literal=True).str.replace("T", " ", literal=True) \
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False)
    return parsed.dt.epoch("us").cast(pl.Float64) / 1e6
