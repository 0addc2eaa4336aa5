"""The dicts the HF Trainer prints (``{'loss': '2.346', 'grad_norm': ..., 'epoch': ...}``), read in
bulk: one row per dict (its offset on the line, kind, epoch, and whether a progress bar came
before it on its line) and one row per entry, for :mod:`hf_stdout`.

The lines of a chunk whose one dict, at the end of the line, has the keys of the chunk's first
such dict in the same order are split at ``, '`` with no regex (nearly all lines of a long
log); any other line (several dicts glued together, a damaged dict, other keys) is read by
regexes. Both give the same entries (a test holds them to it on real logs).
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from ..textlog.values import number

__all__ = ["DICT_KEYS", "keys_of", "read_dicts"]

#: How a dict the Trainer prints starts.
DICT_KEYS = ("{'loss'", "{'eval_", "{'train_runtime'", "{'grad_norm'", "{'learning_rate'")
_DICT = r"\{'[^{}]*\}"
_ITEM = r"'[^']+': (?:'[^']*'|[^,}]+)"


def _pairs(dicts: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The entries (line, off, key, value) of ``dicts`` (one row per dict, ``items`` its
    ``'key': value`` texts) whose values all read as numbers, each key once, and kind and
    epoch per dict."""
    # an entry is 'key': value with no ' in the key: split at its first "': " (no regex)
    pairs = dicts.select("line", "off", "items").explode("items").with_columns(
        entry=pl.col("items").str.splitn("': ", 2)).unnest("entry")
    pairs = pairs.select("line", "off", key=pl.col("field_0").str.slice(1),
                         value=_numbers(pairs.get_column("field_1")))
    # a value that is no number, or a key twice (a damaged dict: which is the key's?)
    twice = pl.col("key").is_duplicated().over("line", "off")
    unreadable = pairs.filter(pl.col("value").is_null() | twice).select("line", "off").unique()
    pairs = pairs.join(unreadable, on=["line", "off"], how="anti")
    return pairs, _kinds(pairs)


def _numbers(printed: pl.Series) -> pl.Series:
    """:func:`number` of each printed value, by a plain cast where that reads it (a
    quoted or bare float: nearly all), the full rules only for the rest."""
    value: pl.Series = printed.str.strip_chars(" '\"").cast(pl.Float64, strict=False)
    missed = value.is_null() & printed.is_not_null()
    if missed.any():
        where = missed.arg_true()
        value = value.scatter(where, pl.select(number(pl.lit(printed.gather(where))))
                              .to_series())
    return value


def keys_of(printed: str) -> list[str]:
    """The keys of the entries of a printed dict, in order.

    >>> keys_of("{'loss': '2.346', 'grad_norm': 0.54, 'epoch': '0.01'}")
    ['loss', 'grad_norm', 'epoch']
    """
    return [item.split("': ", 1)[0][1:] for item in re.findall(_ITEM, printed)]


def read_dicts(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One row per dict on the lines in ``rows`` (its offset, kind, epoch and ``bar_before``
    passed on from ``rows``; unreadable ones marked ``bad``) and one row per entry of the
    readable ones.

    Fast path: a line that ends with its only dict, whose entries are the keys of the chunk's
    first such dict in the same order, is split at ``, '`` with no regex
    (:func:`_layout_dicts`); every other line takes the general regex path.
    """
    text = pl.col("text")
    last = text.str.extract(r"\{'[^{}]*\}$", 0)
    rows = rows.with_columns(off=text.str.find("{'", literal=True).cast(pl.Int64),
                             last=last)
    alone = rows.select(pl.col("last").is_not_null() & (
        pl.col("off") == text.str.len_bytes() - pl.col("last").str.len_bytes())).to_series()
    fast = _layout_dicts(rows.filter(alone)) if alone.any() else None
    rest = rows if fast is None else rows.join(fast[0].select("line"), on="line", how="anti")
    parts, pairs = [], []
    if fast is not None:
        parts.append(fast[0])
        pairs.append(fast[1])
    if rest.height or fast is None:
        events, slow_pairs = _dicts_by_regex(rest.drop("last"))
        parts.append(events)
        pairs.append(slow_pairs)
    if len(pairs) > 1:  # in file order, as the regex path alone gives them
        pairs = [pl.concat(pairs).sort("line", "off", maintain_order=True)]
    return pl.concat(parts, how="diagonal_relaxed"), pairs[0]


def _layout_dicts(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """Events and entries of the dicts in ``last`` that hold the first one's keys in its order
    (each value a number, quoted or not); None when the first has no such layout. The rest
    of ``rows`` is left to the regex path."""
    sample = rows.get_column("last")[0]
    items = re.findall(_ITEM, sample)
    keys = keys_of(sample)
    if not keys or "{" + ", ".join(items) + "}" != sample or len(set(keys)) < len(keys):
        return None  # a key twice: the regex path finds the dict damaged
    fields = pl.col("last").str.split_exact(", '", len(keys) - 1)
    split = rows.select("line", "off", "bar_before", fields=fields).unnest("fields")
    checks, values = [], {}
    for index, key in enumerate(keys):
        prefix = ("{'" if index == 0 else "") + key + "': "
        field = pl.col(f"field_{index}")
        printed = field.str.slice(len(prefix))
        ends = pl.lit(True)
        if index == len(keys) - 1:  # split_exact drops what follows: the dict must end here
            ends = printed.str.ends_with("}")
            printed = printed.str.strip_suffix("}")
        quotes = printed.str.count_matches("'", literal=True)
        # what the regex takes: a value in quotes with none inside, or one without , or '
        whole = pl.when(quotes == 0).then(~printed.str.contains(",", literal=True)).otherwise(
            (quotes == 2) & printed.str.starts_with("'") & printed.str.ends_with("'"))
        checks.append(field.str.starts_with(prefix) & whole & ends)
        values[f"v{index}"] = printed
    split = split.select("line", "off", "bar_before", ok=pl.all_horizontal(checks), **values)
    split = split.filter("ok")
    split = split.with_columns(_numbers(split.get_column(c)).alias(c) for c in values)
    split = split.filter(pl.all_horizontal(pl.col(c).is_not_null() for c in values))
    if split.is_empty():
        return None
    # entries in file order: the dicts' values row by row (no list column to explode)
    n = len(keys)
    pairs = pl.DataFrame({
        "line": np.repeat(split.get_column("line").to_numpy(), n),
        "off": np.repeat(split.get_column("off").to_numpy(), n),
        "key": pl.Series(keys).gather(np.tile(np.arange(n), split.height)),
        "value": np.column_stack([split.get_column(c).to_numpy() for c in values]).ravel()})
    own = {key: pl.col(f"v{keys.index(key)}") if key in keys else pl.lit(None, pl.Float64)
           for key in ("epoch", "step")}
    events = split.select(
        "line", "off", "bar_before", snippet=pl.lit(None, pl.String), bad=pl.lit(False),
        epoch=own["epoch"], own_step=own["step"], kind=pl.lit(_kind(keys)))
    return events, pairs


def _kind(keys: list[str]) -> str:
    """The kind of a dict with these keys, as :func:`_kinds` tells it."""
    if "train_runtime" in keys and "loss" not in keys:  # a 5.x train log with tokens has it
        return "summary"
    if any(k.startswith("eval_") for k in keys):
        return "eval"
    if any(k.startswith(("test_", "predict_")) for k in keys):
        return "test"
    return "train" if "loss" in keys else "other"


def _dicts_by_regex(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`_dicts` of any line, by regexes: every dict on it, every entry of each."""
    text = pl.col("text")
    found = rows.with_columns(dict=text.str.extract_all(_DICT))
    trainer_like = pl.any_horizontal(*(text.str.contains(k, literal=True) for k in DICT_KEYS))
    bad = found.filter((pl.col("dict").list.len() == 0) & trainer_like).select(
        "line", off="off", bad=pl.lit(True),  # from the first {' (off counts bytes)
        snippet=("{'" + text.str.splitn("{'", 2).struct.field("field_1")).str.slice(0, 200))
    found = found.explode("dict").filter(pl.col("dict").is_not_null()).with_columns(
        off=pl.col("off") + pl.int_range(pl.len()).over("line"))
    good = found.select(
        "line", "off", "bar_before", snippet=pl.col("dict").str.slice(0, 200),
        items=pl.col("dict").str.extract_all(_ITEM), bad=pl.lit(False))
    dicts = pl.concat([good, bad], how="diagonal_relaxed")
    pairs, kinds = _pairs(dicts)
    dicts = dicts.drop("items").join(kinds, on=["line", "off"], how="left").with_columns(
        bad=pl.col("bad") | pl.col("kind").is_null())
    return dicts.with_columns(snippet=pl.when("bad").then("snippet")), pairs


def _kinds(pairs: pl.DataFrame) -> pl.DataFrame:
    """(line, off) -> kind (train/eval/test/summary/other) and epoch of each readable dict."""
    key = pl.col("key")
    per = pairs.group_by("line", "off").agg(
        # a 5.x train log of a run counting tokens has train_runtime too: loss makes it train
        summary=(key == "train_runtime").any() & ~(key == "loss").any(),
        eval=key.str.starts_with("eval_").any(),
        test=(key.str.starts_with("test_") | key.str.starts_with("predict_")).any(),
        train=(key == "loss").any(), epoch=pl.col("value").filter(key == "epoch").first(),
        own_step=pl.col("value").filter(key == "step").first())
    kind = (pl.when("summary").then(pl.lit("summary")).when("eval").then(pl.lit("eval"))
            .when("test").then(pl.lit("test")).when("train").then(pl.lit("train"))
            .otherwise(pl.lit("other")))
    return per.select("line", "off", "epoch", "own_step", kind=kind)
