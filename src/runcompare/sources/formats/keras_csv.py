"""Keras ``CSVLogger`` files: one row an epoch, ``epoch`` first, then the logs' keys in sorted
order (``keras.callbacks.CSVLogger.on_epoch_end``: a ``csv.DictWriter`` of the excel dialect,
so rows end in ``\\r\\n``; any file name, ``training.log`` in Keras' docs, often ``*.csv``).

``epoch`` is the 0-based epoch index Keras passes to ``on_epoch_end``, so the step unit is
epochs (a ``step-is-epoch`` finding), as for Keras' TensorBoard ``epoch_*`` tags. Names are
Keras' printed ones (``loss`` -> ``train/loss``, ``val_loss`` -> ``eval/loss``, ``lr`` /
``learning_rate`` -> ``train/learning_rate``). With ``append=True`` a resumed fit adds rows
without a new header; an epoch that goes back starts a new leg. Cells Keras could not write
as numbers (an empty cell, ``NA``) are left out; a row that is not whole is reported.
A file is taken when its header starts with ``epoch`` and has no ``step`` column (Lightning's
metrics.csv has one) and its next row starts with a whole number.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

import polars as pl

from ...errors import InputError
from ...model import Finding, RawLog
from ..codecs.files import files_in, is_file
from ..format import Format
from ..naming import PRINTED, canonical_names
from ..textlog.damage import unparsed_finding
from ..textlog.points import number_legs, to_raw

__all__ = ["FORMAT", "files", "read"]

#: Suffixes of the files looked at in a folder.
_SUFFIXES = (".csv", ".log", ".txt")
_HEAD = 1 << 12


def files(path: Path) -> list[Path]:
    """The CSVLogger files at ``path`` (the file, or those in the folder), in name order."""
    try:
        if is_file(path):
            return [path] if _is_keras_csv(path) else []
        return [file for file in files_in(path)
                if file.suffix in _SUFFIXES and _is_keras_csv(file)]
    except OSError:  # a folder under one this user may not read
        return []


def _is_keras_csv(file: Path) -> bool:
    with file.open("rb") as handle:
        head = handle.read(_HEAD).decode("utf-8", errors="replace").splitlines()
    if len(head) < 2:
        return False
    header = head[0].split(",")
    first = head[1].split(",")[0]
    return header[0] == "epoch" and len(header) > 1 and "step" not in header \
        and first.isdigit()


def read(path: Path, *, hints: Mapping[str, object] | None = None) -> RawLog:
    """Every point of the CSVLogger file at ``path``."""
    found = files(path)
    if not found:
        raise InputError(f"{path}: no Keras CSVLogger file found (a CSV whose header starts "
                         "with epoch, e.g. epoch,loss,val_loss)")
    file = found[0]
    try:
        text = file.read_bytes().decode("utf-8", errors="replace").replace("\r\n", "\n")
    except OSError as exc:
        raise InputError(f"{file}: cannot be read ({exc.strerror})") from exc
    frame = pl.read_csv(io.StringIO(text), infer_schema=False, truncate_ragged_lines=True)
    keys = [c for c in frame.columns if c != "epoch"]
    numbers = frame.with_row_index("line", offset=2).select(
        "line", step=pl.col("epoch").cast(pl.Int64, strict=False),
        **{key: pl.col(key).str.strip_chars().cast(pl.Float64, strict=False) for key in keys})
    bad = numbers.filter(pl.col("step").is_null())
    rows = numbers.filter(pl.col("step").is_not_null())
    if rows.is_empty():
        raise InputError(f"{file}: no row with a whole epoch")
    marks = rows.select("step", launch=pl.lit(False), stepped=pl.lit(True))
    rows = rows.with_columns(number_legs(marks, launch="launch", stepped="stepped"),
                             wall_time=pl.lit(None, pl.Float64))
    names = canonical_names(keys, PRINTED)
    findings = [Finding("info", "step-is-epoch",
                        f"{file}: a Keras CSVLogger file, one row an epoch with epoch = the "
                        "0-based epoch index; the step unit is epochs, not optimizer steps "
                        "(compare on --x epoch)")]
    unparsed = unparsed_finding(file, bad.select(
        "line", text=pl.lit("(an epoch that is not a whole number)")), "CSVLogger rows")
    return RawLog(path=path, scalars=to_raw(rows, names), step_unit="epoch",
                  findings=findings + ([unparsed] if unparsed else []), files=[file],
                  aliases={name: key for key, name in names.items() if name != key})


FORMAT = Format(
    "keras-csv",
    "Keras CSVLogger files: a CSV whose header starts with epoch (epoch,loss,val_loss,...)",
    read=read, files=files)
