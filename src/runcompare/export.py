"""Write runs' points for other tools: a parquet dataset, CSV, JSON lines or TensorBoard events.

Every format but TensorBoard holds exactly docs/architecture.md's columns (:data:`SCALAR_SCHEMA`), every
axis included, with their types; nulls stay nulls.

- ``parquet``: a hive-partitioned dataset, ``<out>/run=<name>/part-0.parquet``, one folder per
  run (also for a single run), read by ``polars.scan_parquet(out)`` and DuckDB's
  ``read_parquet('<out>/**/*.parquet', hive_partitioning=true)``. The name in the folder is
  percent-encoded (:func:`encode_name`), which both readers decode; each file also holds the
  ``run`` column, so a name such as ``007`` stays a string.
- ``csv``: one file, all runs; a null is an empty field, NaN and ±inf are ``NaN``, ``inf``,
  ``-inf``. ``jsonl``: one object per line, all runs; a null is ``null``, NaN and ±inf are the
  strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (proto3's JSON mapping), since JSON has no
  such numbers. :func:`read_export` reads both back exactly.
- ``tensorboard``: one folder per run (:func:`~runcompare.tb_writer.run_folder`), one event
  file each, one scalar tag per metric, the event step being the chosen axis (tokens by
  default). Steps are whole numbers: ``flops`` are rounded to whole FLOPs and
  ``device_hours`` written as device-seconds (:data:`TB_STEP_UNITS`).

An export is written beside its destination and moved into place when complete. It is never
written onto or inside a run being read. An existing destination is replaced only with
``force=True``, and only if it is an earlier export of that format that runcompare wrote,
whatever ``force`` says (:mod:`runcompare.outputs`): a csv file whose header, or a JSON-lines
file whose first object, has exactly the export's columns; a folder holding nothing but
``run=*/part-*.parquet`` files with the key ``runcompare`` in their metadata, or nothing but
``events.out.tfevents.*`` files written by runcompare; an empty folder is used as it is. Input
files are only read.
"""

from __future__ import annotations

import functools
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import polars as pl

from .display import did_you_mean
from .errors import InputError, MissingInfoError, UsageError
from .model import SCALAR_SCHEMA, Run
from .outputs import claim, head
from .remote import publish, put_bytes, remote_url, tails, upload
from .tb_writer import TB_AXES, TB_STEP_UNITS, run_folder, whole_steps, write_events, written_here

__all__ = ["FORMATS", "PARQUET_KEY", "TB_STEP_UNITS", "Exported", "encode_name", "export",
           "export_parts", "parts_written_there", "read_export", "write_part"]

#: Export formats, the default first.
FORMATS = ("parquet", "csv", "jsonl", "tensorboard")

_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl",
             ".ndjson": "jsonl"}
_FLOATS = [name for name, dtype in SCALAR_SCHEMA.items() if dtype == pl.Float64]
#: The key in each parquet file's metadata that marks it as runcompare's (value: its version).
PARQUET_KEY = "runcompare"
#: The first line of a csv export.
_CSV_HEADER = ",".join(SCALAR_SCHEMA).encode()


@dataclass(frozen=True)
class Exported:
    """What :func:`export` wrote: the destination, its format, the files, runs and points."""

    path: Path
    format: str
    files: list[Path]
    runs: int
    points: int
    #: The URL it was uploaded to, for a remote destination (``path`` was the local copy).
    url: str | None = None


def export(runs: Sequence[Run], path: str | Path, *, format: str | None = None,
           x: str | None = None, force: bool = False) -> Exported:
    """Write the points of ``runs`` to ``path`` as ``format`` (see the module docstring).

    ``format`` defaults to the suffix of ``path`` (``.parquet``/``.pq``, ``.csv``,
    ``.jsonl``/``.ndjson``), else parquet. ``x`` is the TensorBoard step axis (``tokens`` by
    default; ``samples``, ``micro_step`` or ``step``); a run that lacks it raises
    :class:`MissingInfoError` naming the fact to supply. ``force`` replaces an earlier export.

    ::

        runs = rc.load_many(["sample_logs/mamba", "sample_logs/attn"])
        export(runs, "runs.parquet").files
    [PosixPath('runs.parquet/run=mamba/part-0.parquet'), PosixPath('runs.parquet/run=attn/...')]
    """
    url = remote_url(path)
    if url is not None:  # written here, then uploaded
        return _uploaded(runs, url, format=format, x=x, force=force)
    out = Path(path)
    fmt = _format(out, format)
    axis = _axis(fmt, x)
    named = _frames(runs, fmt=fmt, x=axis)
    target = Path(os.path.abspath(out))
    _check_destination(target, fmt, force=force, runs=runs)
    write = (functools.partial(_write_tensorboard, x=cast(str, axis)) if fmt == "tensorboard"
             else _WRITERS[fmt])
    written = _publish(target, lambda staged: write(named, staged))
    return Exported(path=out, format=fmt, files=[out / part for part in written],
                    runs=len(named), points=sum(frame.height for _, frame in named))


def _uploaded(runs: Sequence[Run], url: str, **options: Any) -> Exported:
    """:func:`export` to a local copy, uploaded to ``url``: the result names the URL and the
    files relative to it."""
    done = cast(Exported, upload(url, lambda local: export(runs, local, format=options["format"],
                                                          x=options["x"]),
                                 force=options["force"]))
    return replace(done, files=[f.relative_to(done.path) for f in done.files], url=url)


def read_export(path: str | Path, *, format: str | None = None) -> pl.DataFrame:
    """Read a parquet, csv or jsonl export back into a frame of :data:`SCALAR_SCHEMA`.

    The recipes, for other readers: ``pl.scan_parquet(path)``; ``pl.read_csv(path,
    schema=SCALAR_SCHEMA)``; for JSON lines, read the float columns as strings and cast them.
    """
    source = Path(path)
    fmt = _format(source, format)
    as_text = {name: pl.String if name in _FLOATS else dtype
               for name, dtype in SCALAR_SCHEMA.items()}
    readers: dict[str, Callable[[], pl.DataFrame]] = {
        "parquet": lambda: pl.scan_parquet(source, hive_partitioning=True).collect(),
        "csv": lambda: pl.read_csv(source, schema=SCALAR_SCHEMA),
        "jsonl": lambda: pl.read_ndjson(source, schema=as_text),
    }
    if fmt not in readers:
        raise UsageError(f"read_export reads parquet, csv and jsonl exports, not {fmt}; "
                         "open a TensorBoard export with `tensorboard --logdir`")
    try:
        frame = readers[fmt]()
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"{source}: cannot be read as a {fmt} export ({exc}); pass the "
                         "folder or file that export wrote, and format= if its suffix "
                         "does not say") from exc
    return frame.select(pl.col(name).cast(dtype) for name, dtype in SCALAR_SCHEMA.items())


def encode_name(name: str) -> str:
    """A run name as one folder name that decodes back to it (``urllib.parse.unquote``).

    UTF-8 percent-encoding of every character but ASCII letters, digits and ``-_.~``, as in a
    hive partition value, and of a leading or trailing dot (no ``..``, hidden or
    Windows-trimmed folders).

    >>> encode_name("sweep/lr=3e-4 <b>")
    'sweep%2Flr%3D3e-4%20%3Cb%3E'
    >>> encode_name("..")
    '%2E%2E'
    """
    text = quote(name, safe="")
    if text.startswith("."):
        text = "%2E" + text[1:]
    return text[:-1] + "%2E" if text.endswith(".") else text


def _format(path: Path, format: str | None) -> str:
    if format is None:
        suffix = path.suffix.lower()
        if suffix and suffix not in _SUFFIXES:
            raise UsageError(f"{path}: unknown export suffix {suffix!r}; "
                             f"{did_you_mean(suffix, _SUFFIXES)}name the output "
                             f"{', '.join(list(_SUFFIXES)[:-1])} or {list(_SUFFIXES)[-1]} (a "
                             "folder without a suffix is parquet), or pass --format "
                             f"{', '.join(FORMATS[:-1])} or {FORMATS[-1]}")
        return _SUFFIXES.get(suffix, "parquet")
    if format.lower() not in FORMATS:
        raise UsageError(f"unknown export format {format!r}; {did_you_mean(format, FORMATS)}"
                         f"choose one of {', '.join(FORMATS)}")
    return format.lower()


def _axis(fmt: str, x: str | None) -> str | None:
    """The TensorBoard step axis; the other formats hold every axis, so they take none."""
    if fmt != "tensorboard":
        if x is not None:
            raise UsageError(f"--x sets the step of a TensorBoard export; a {fmt} export holds "
                             "every axis as a column, so leave --x out")
        return None
    if (x or "tokens") not in TB_AXES:
        raise UsageError(f"TensorBoard steps are whole numbers: --x must be one of "
                         f"{', '.join(TB_AXES)}, not {x!r} (TensorBoard shows wall and "
                         "relative time itself)")
    return x or "tokens"


def _frames(runs: Sequence[Run], *, fmt: str, x: str | None) -> list[tuple[str, pl.DataFrame]]:
    """Each run's name and points in exactly the columns of
    :data:`~runcompare.model.SCALAR_SCHEMA`, after checking names and axis."""
    names = [run.name for run in runs]
    _check_names(names, fmt)
    columns = [pl.col(name).cast(dtype) for name, dtype in SCALAR_SCHEMA.items()]
    frames = [(run.frame(x) if x else run.scalars).select(columns)
              .with_columns(run=pl.lit(run.name, pl.String)) for run in runs]
    for run, frame in zip(runs, frames):
        _require_every_point(run, frame, x)
    if x is not None:
        frames = [_whole(run, frame, x) for run, frame in zip(runs, frames)]
    return list(zip(names, frames))


def _check_names(names: list[str], fmt: str) -> None:
    """Refuse names that would not give each run a folder (or rows) of its own."""
    if not names:
        raise UsageError("no runs to export")
    if len(set(names)) < len(names) or "" in names:
        raise UsageError(f"run names must be unique and non-empty to export, got {names}; "
                         "name runs with --set RUN:name=NEW")
    folders = [_folder(name, fmt) for name in names]
    if len({folder.casefold() for folder in folders}) < len(folders):
        raise UsageError(f"run names {names} differ only in case; their folders would clash "
                         "on macOS and Windows: rename one with --set RUN:name=NEW")


def _whole(run: Run, frame: pl.DataFrame, x: str) -> pl.DataFrame:
    """The frame with whole-number TensorBoard steps, or a refusal naming the axis to use."""
    whole = whole_steps(frame, x)
    if whole is None:
        raise UsageError(f"run {run.name!r}: its {x} values do not fit TensorBoard's step (a "
                         "whole number below 2**63); export with --x tokens, or to parquet")
    return whole


def _require_every_point(run: Run, frame: pl.DataFrame, x: str | None) -> None:
    """A TensorBoard event needs a step: refuse, rather than drop, points without one."""
    missing = 0 if x is None else frame.get_column(x).null_count()
    if missing:
        raise MissingInfoError(f"run {run.name!r} has {missing} of {frame.height} points "
                               f"without a {x} value, which a TensorBoard step needs; choose "
                               "another --x or export to parquet, which keeps nulls")


def _folder(name: str, fmt: str) -> str:
    """The folder (relative to the export) that holds a run."""
    if fmt == "parquet":
        return f"run={encode_name(name)}"
    return run_folder(name)


def _check_destination(out: Path, fmt: str, *, force: bool, runs: Sequence[Run]) -> None:
    folder = fmt in ("parquet", "tensorboard")
    what = f"a {fmt} export" if folder else f"a {fmt} export file"
    if claim(out, runs=runs, what=what, ours=functools.partial(_is_export, fmt=fmt),
             folder=folder) and not force:
        raise InputError(f"{out} already exists; pass --force to replace it, or choose "
                         "another --output")


def _is_export(out: Path, fmt: str) -> bool:
    """Whether ``out`` is a ``fmt`` export runcompare wrote (see the module docstring): no
    links, no other files."""
    if fmt in ("csv", "jsonl"):
        first = head(out, 1 << 20).partition(b"\n")
        return bool(first[1]) and (first[0] == _CSV_HEADER if fmt == "csv"
                                   else _json_keys(first[0]) == list(SCALAR_SCHEMA))
    if out.is_symlink() or not out.is_dir():
        return False
    for folder, dirs, files in os.walk(out):
        base = Path(folder)
        if any((base / entry).is_symlink() for entry in (*dirs, *files)):
            return False
        for file in files:
            parts = (base / file).relative_to(out).parts
            ours = (file.startswith("events.out.tfevents.") and written_here(base / file)
                    if fmt == "tensorboard" else
                    len(parts) == 2 and parts[0].startswith("run=")
                    and file.startswith("part-") and file.endswith(".parquet")
                    and _marked_parquet(base / file))
            if not ours:
                return False
    return True


def _json_keys(line: bytes) -> list[str] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return list(value) if isinstance(value, dict) else None


def _marked_parquet(file: Path) -> bool:
    if head(file, 4) != b"PAR1":
        return False
    try:
        return PARQUET_KEY in pl.read_parquet_metadata(file)
    except (OSError, pl.exceptions.PolarsError):
        return False


def _publish(out: Path, write: Callable[[Path], list[Path]]) -> list[Path]:
    """Write into a temporary sibling of ``out`` (absolute), then move it into place, the old
    one aside; returns the files written, relative to ``out``."""
    if not out.name:
        raise UsageError(f"cannot export to {out}; choose a file or folder for --output")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    except OSError as exc:
        raise InputError(f"cannot create {out}: {exc.strerror}; choose another --output") from exc
    staged = scratch / out.name
    try:
        files = write(staged)
        if out.exists() or out.is_symlink():
            os.replace(out, scratch / "replaced")
        os.replace(staged, out)
    except OSError as exc:
        raise InputError(f"cannot write {out}: {exc}; choose another --output") from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return [file.relative_to(staged) for file in files]


def _write_parquet(frames: list[tuple[str, pl.DataFrame]], out: Path) -> list[Path]:
    files = []
    for name, frame in frames:
        files.append(out / _folder(name, "parquet") / "part-0.parquet")
        write_part(frame, name, files[-1])
    return files


def write_part(scalars: pl.DataFrame, name: str, file: str | Path) -> None:
    """One run's points as a partition file of a parquet export: the columns of
    :data:`~runcompare.model.SCALAR_SCHEMA`, ``name`` in the run column, runcompare's key in
    the file's metadata. ``file`` may be a URL (a worker writing into a bucket)."""
    from ._version import __version__

    columns = [pl.col(column).cast(dtype) for column, dtype in SCALAR_SCHEMA.items()]
    frame = scalars.select(columns).with_columns(run=pl.lit(name, pl.String))
    url = remote_url(file)
    if url is not None:
        buffer = io.BytesIO()
        frame.write_parquet(buffer, metadata={PARQUET_KEY: __version__})
        put_bytes(url, buffer.getvalue())
        return
    Path(file).parent.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(file, metadata={PARQUET_KEY: __version__})


def parts_written_there(path: str | Path, format: str | None) -> bool:
    """Whether an export to ``path`` as ``format`` is a dataset whose partitions the readers
    can write themselves (:func:`export_parts`): a parquet dataset, on disk or in a bucket."""
    return _format(Path(path), format) == "parquet"


def export_parts(read: Callable[[str | Path], Sequence[tuple[Run, str]]], path: str | Path,
                 *, force: bool = False) -> Exported:
    """A parquet dataset whose partitions the readers write (on a Dask cluster, each worker
    the runs it reads): ``read(parts)`` reads the runs and gives each with the file in
    ``parts`` that holds its points; ``parts`` is a folder beside ``path`` (a prefix beside
    it in a bucket), which the workers must reach. Here the files are only moved into place
    once, as :func:`export` places its own (in a bucket, a copy inside the store)."""
    if not parts_written_there(path, None):
        raise UsageError(f"{path}: the workers write the partitions of a parquet dataset; "
                         "export to a folder (no suffix, or .parquet)")
    url = remote_url(path)
    if url is not None:
        def staged(prefix: str) -> list[tuple[str, str]]:
            runs = read(f"{prefix}/parts")
            _check_names([run.name for run, _ in runs], "parquet")
            return [(part, f"{_folder(run.name, 'parquet')}/part-0.parquet")
                    for run, part in runs]

        names = publish(url, staged, force=force)
        return Exported(path=Path(path), format="parquet", files=[Path(name) for name in names],
                        runs=len(names), points=_rows(url, names), url=url)
    out = Path(path)
    target = Path(os.path.abspath(out))
    counted: list[int] = []

    def write(staged: Path) -> list[Path]:
        parts = staged.parent / "parts"
        parts.mkdir()
        runs = read(parts)
        _check_names([run.name for run, _ in runs], "parquet")
        _check_destination(target, "parquet", force=force, runs=[run for run, _ in runs])
        files = []
        for run, part in runs:
            files.append(staged / _folder(run.name, "parquet") / "part-0.parquet")
            files[-1].parent.mkdir(parents=True)
            os.replace(part, files[-1])
            counted.append(pl.scan_parquet(files[-1]).select(pl.len()).collect().item())
        return files

    written = _publish(target, write)
    return Exported(path=out, format="parquet", files=[out / part for part in written],
                    runs=len(written), points=sum(counted))


#: Bytes from the end of a partition that hold its footer (a run's is a few kB).
_TAIL = 1 << 16


def _rows(url: str, names: list[str]) -> int:
    """The rows of the parquet files ``url``/name, from their footers."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 0
    for name, tail in zip(names, tails(url, names, _TAIL)):
        footer = int.from_bytes(tail[-8:-4], "little") + 8
        if footer > len(tail):  # a footer larger than the tail fetched
            tail = tails(url, [name], footer)[0]
        rows += pq.read_metadata(pa.BufferReader(tail)).num_rows
    return rows


def _write_csv(frames: list[tuple[str, pl.DataFrame]], out: Path) -> list[Path]:
    pl.concat([frame for _, frame in frames]).write_csv(out)
    return [out]


def _write_jsonl(frames: list[tuple[str, pl.DataFrame]], out: Path) -> list[Path]:
    lines = pl.concat([frame for _, frame in frames]).select(_json_line())
    lines.write_csv(out, include_header=False, quote_style="never")
    return [out]


def _json_line() -> pl.Expr:
    """Each row as one JSON object, keys in the order of
    :data:`~runcompare.model.SCALAR_SCHEMA`, built column-wise in polars."""
    pieces: list[pl.Expr | str] = []
    for i, name in enumerate(SCALAR_SCHEMA):
        pieces += [pl.lit(("{" if i == 0 else ",") + f'"{name}":'), _json_value(name)]
    return pl.concat_str([*pieces, pl.lit("}")]).alias("line")


def _json_value(name: str) -> pl.Expr:
    """A column as JSON text: strings escaped by polars, non-finite floats as strings."""
    col = pl.col(name)
    if SCALAR_SCHEMA[name] == pl.String:  # {"run":"a\"b"} -> "a\"b"
        encoded = pl.struct(col).struct.json_encode()
        return encoded.str.strip_prefix(f'{{"{name}":').str.strip_suffix("}")
    text = col.cast(pl.String)
    if SCALAR_SCHEMA[name] == pl.Float64:
        text = (pl.when(col.is_nan()).then(pl.lit('"NaN"'))
                .when(col == float("inf")).then(pl.lit('"Infinity"'))
                .when(col == float("-inf")).then(pl.lit('"-Infinity"'))
                .otherwise(text))
    return text.fill_null("null")


_WRITERS: dict[str, Callable[[list[tuple[str, pl.DataFrame]], Path], list[Path]]] = {
    "parquet": _write_parquet, "csv": _write_csv, "jsonl": _write_jsonl,
}


def _write_tensorboard(frames: list[tuple[str, pl.DataFrame]], out: Path, *,
                       x: str) -> list[Path]:
    return [write_events(frame, out / _folder(name, "tensorboard"), x=x)
            for name, frame in frames]
