"""Lines of ``head | key: value | key: value ...`` (Megatron-LM's train lines) split into one
column per key, vectorised in polars (the polars path; the native scanner reads the common
layout of such lines without splitting them, see :mod:`._layout`)."""

from __future__ import annotations

import polars as pl

from .layout import MAX_LAYOUTS

__all__ = ["KEY", "delimited_fields"]

#: Prefix of the key columns of :func:`delimited_fields`.
KEY = "k:"
#: Lines of the modal layout a round looks at for one whose every field is a key and value.
_SAMPLES = 8


def delimited_fields(rows: pl.DataFrame, *, sep: str, kv: str) -> pl.DataFrame:
    """Split lines of ``head sep key kv value sep key kv value ...`` into columns.

    Returns ``line``, ``head`` (the text before the first ``sep``), ``bad`` (a field without
    ``kv``) and one String column per key, named ``KEY + key``, holding the stripped value.
    Fast path: a run prints the same keys in the same order on every line, so the most common
    layout is matched with ``split_exact`` and prefix checks (no regex); lines of another
    layout take the next round, and after :data:`MAX_LAYOUTS` rounds the rest are split field
    by field.

    >>> rows = pl.DataFrame({"line": [1, 2], "text": ["it 1 | a: 2 | b:  3 |", "it 2 | c: 4"]})
    >>> out = delimited_fields(rows, sep="|", kv=":").sort("line")
    >>> out.select("line", "head", "k:a", "k:b", "k:c").rows()
    [(1, 'it 1 ', '2', '3', None), (2, 'it 2 ', None, None, '4')]
    """
    text = pl.col("text")
    rows = rows.with_columns(n=text.str.count_matches(sep, literal=True))
    parts: list[pl.DataFrame] = []
    for _ in range(MAX_LAYOUTS):
        if rows.is_empty():
            break
        counts = rows.get_column("n")
        modal = int(counts.mode().min())  # type: ignore[arg-type]
        is_modal = counts == modal
        layout = _layout(rows.filter(is_modal).get_column("text").head(_SAMPLES), sep, kv)
        # a field of a row that is not the layout's key: value (text between seps, or after the
        # last) is no field: the row is bad, whatever the sample holds there
        keyed = {index for index, _ in layout}
        loose = [index for index in range(1, modal + 1) if index not in keyed]
        # most chunks hold one layout only: no filtering copies then
        modal_rows = rows if is_modal.all() else rows.filter(is_modal)
        split = modal_rows.select("line", "text", "n",
                                  fields=text.str.split_exact(sep, modal)).unnest("fields")
        match = split.select(pl.all_horizontal(
            True, *(pl.col(f"field_{index}").str.starts_with(prefix) for index, prefix in layout)
        )).to_series()
        matched = split if match.all() else split.filter(match)
        stray = pl.any_horizontal(False, *(pl.col(f"field_{index}").str.strip_chars() != ""
                                           for index in loose))
        # a key twice on a line (a damaged one): neither value is the key's, the line is bad
        names = [prefix[:-len(kv)].strip() for _, prefix in layout]
        twice = {name for name in names if names.count(name) > 1}
        parts.append(matched.select(
            "line", head="field_0", bad=stray.fill_null(False) | bool(twice),
            **{KEY + name: pl.col(f"field_{index}").str.slice(len(prefix)).str.strip_chars()
               for (index, prefix), name in zip(layout, names) if name not in twice},
            **{KEY + name: pl.lit(None, pl.String) for name in twice}))
        if matched.height == rows.height:
            rows = rows.clear()
            break
        rest = [split.filter(~match).select(rows.columns)] \
            if matched.height < split.height else []
        rows = pl.concat([rows.filter(~is_modal), *rest])
    if not rows.is_empty():
        parts.append(_fields_one_by_one(rows, sep, kv))
    if not parts:
        return pl.DataFrame(schema={"line": pl.Int64, "head": pl.String, "bad": pl.Boolean})
    out = pl.concat(parts, how="diagonal_relaxed")
    return out.sort("line") if len(parts) > 1 else out


def _layout(texts: pl.Series, sep: str, kv: str) -> list[tuple[int, str]]:
    """The field prefixes (:func:`_field_prefixes`) of the first of ``texts`` whose every
    field is ``key: value`` (a blank one aside), each key once, else of the first: a layout
    taken from a damaged line (``iterations\ufffd 0``, its colon lost) had every good line's
    field there for text where none belongs, and each line bad."""
    for text in texts:
        prefixes = _field_prefixes(text, sep, kv)
        keyed = {index for index, _ in prefixes}
        keys = [prefix[:-len(kv)].strip() for _, prefix in prefixes]
        if len(set(keys)) == len(keys) and all(
                not part.strip() for index, part in enumerate(text.split(sep))
                if index > 0 and index not in keyed):
            return prefixes
    return _field_prefixes(texts[0], sep, kv)


def _field_prefixes(sample: str, sep: str, kv: str) -> list[tuple[int, str]]:
    """(field index, ``" key:"`` prefix) of each key-value field of one line."""
    return [(i, part[:part.index(kv) + len(kv)]) for i, part in enumerate(sample.split(sep))
            if i > 0 and kv in part and part.split(kv, 1)[0].strip()]


def _fields_one_by_one(rows: pl.DataFrame, sep: str, kv: str) -> pl.DataFrame:
    parts = (rows.select("line", part=pl.col("text").str.split(sep))
             .with_columns(index=pl.int_ranges(pl.col("part").list.len()))
             .explode("part", "index"))
    heads = parts.filter(pl.col("index") == 0).select("line", head="part")
    fields = parts.filter((pl.col("index") > 0) & (pl.col("part").str.strip_chars() != ""))
    # split at the first kv (str.find counts bytes and str.slice characters: a key holding
    # a non-ASCII character lost the value's first digits to them)
    pair = pl.col("part").str.splitn(kv, 2)
    value = pair.struct.field("field_1")
    fields = fields.select("line", key=pl.when(value.is_not_null()).then(
        KEY + pair.struct.field("field_0").str.strip_chars()), value=value.str.strip_chars())
    # a key twice on a line (a damaged one): neither value is the key's, the line is bad
    twice = pl.col("key").is_not_null() & pl.col("key").is_duplicated().over("line")
    fields = fields.with_columns(value=pl.when(~twice).then("value"), twice=twice)
    bad = fields.group_by("line").agg(bad=pl.col("key").is_null().any()
                                      | (pl.col("key") == KEY).any() | pl.col("twice").any())
    wide = (fields.filter(pl.col("key").is_not_null() & (pl.col("key") != KEY))
            .pivot(on="key", index="line", values="value", aggregate_function="first"))
    return heads.join(bad, on="line", how="left").join(wide, on="line", how="left") \
        .with_columns(pl.col("bad").fill_null(False))
