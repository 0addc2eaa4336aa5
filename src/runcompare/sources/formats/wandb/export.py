"""W&B history exported from the server: the web app's panel CSV, or the public API's history.

**API history** (``wandb.Api().run(path).history()`` or ``scan_history()`` written with pandas'
``to_csv``, ``to_json(orient="records", lines=True)`` or ``to_parquet``): one row per
``wandb.log()`` call with ``_step``, ``_runtime``, ``_timestamp`` and the metrics; pandas'
unnamed index column is dropped. One file is one run, named after the file. pandas writes NaN
as an empty CSV cell and a JSON ``null``, the same as "not logged"; ``to_json`` keeps 10
decimal places unless told otherwise. The step: ``--set step_metric=KEY``, else the step
metric an integration declares when it is a column (HF Trainer ``train/global_step``, Lightning
``trainer/global_step``; an export does not keep the declaration, so an info finding says it
was assumed), else ``_step`` (log calls, with the same warning as a run folder).

**Panel CSV** (the web app's "Export panel data" of a line plot): an x-axis column (``Step``
is W&B's ``_step``; a custom x-axis is named after its metric), then for each run (or group,
``Group: NAME``) ``<run> - <metric>`` with ``__MIN``/``__MAX`` columns; one file may hold
several runs and metrics. Each run is the root ``<file>/<run>`` (``/`` in a run name written
``%2F``). The panel draws a sample of a long run, each drawn point standing for a bucket whose
spread ``__MIN``/``__MAX`` give; where they differ from the value, a finding says so. A
time x-axis (``Wall Time``, ``Relative Time (...)``) has no step: that is an input error.

Neither export holds the run's config: state the batch facts with ``--set`` or
``runcompare.toml``.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

import polars as pl

from ....errors import InputError
from ....model import Finding, RawLog
from ...codecs.files import exists, files_in, is_file
from ...format import Format
from ...textlog.damage import cut_finding, without_cut_row
from ._history import with_values
from ._leg import Leg
from ._steps import LOG_STEP, history_scalars

__all__ = ["FORMAT", "expand", "files", "read", "virtual"]

#: Suffixes of exported history.
_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
#: W&B's own columns that mark API history.
_MARK, _W_AND_B = "_step", ("_runtime", "_timestamp")
#: The most rows the web app writes into a panel export (it samples longer runs down to it).
PANEL_ROWS = 10_000
#: A panel x-axis that counts epochs (Keras' and Lightning's ``epoch``, ``train/epoch``).
_EPOCH_AXIS = re.compile(r"(?:^|/)epoch$")
#: Step metrics that integrations declare with ``define_metric("*", step_metric=...)``.
_DECLARED = ("train/global_step", "trainer/global_step")
#: A panel column: ``<run> - <metric>``, maybe ``__MIN``/``__MAX``.
_PANEL = re.compile(r"^(?P<run>.+?) - (?P<metric>.+?)(?P<bound>__MIN|__MAX)?$")
#: x-axes of a panel that are times, not steps.
_TIME_AXES = re.compile(r"^(Wall Time|Relative Time.*|_timestamp|_runtime)$")
#: pandas' index column, as ``to_csv`` writes it (and as it reads back).
_INDEX = ("", "Unnamed: 0", "__index_level_0__")


def virtual(path: Path) -> bool:
    """Whether ``path`` is a run root that does not exist on disk: ``<panel csv>/<run>``, or
    ``<folder>/<run>`` for a run of the panel CSVs in a folder."""
    return _panel_root(path) is not None


def files(path: Path) -> list[Path]:
    root = _panel_root(path)
    return root[0] if root is not None else list(_exports(path))


def expand(path: Path) -> list[Path]:
    """One root per run: an API history file; ``<file>/<run>`` for each run of a panel CSV;
    for a folder, ``<folder>/<run>`` for each run of its panel CSVs (one run from all the
    panels that share an x-axis; a run exported on several x-axes stays one root per file)."""
    if virtual(path):
        return [path]
    kinds = _exports(path)
    roots = [file for file, (kind, _) in kinds.items() if kind == "api"]
    panels = {file: header for file, (kind, header) in kinds.items() if kind == "panel"}
    if is_file(path):
        return roots + [path / _encode(run) for header in panels.values()
                        for run in _panel_runs(header)]
    axes: dict[str, set[str]] = {}
    for header in panels.values():
        for run in _panel_runs(header):
            axes.setdefault(run, set()).add(header[0])
    for run, seen in axes.items():
        if len(seen) == 1:
            roots.append(path / _encode(run))
        else:
            roots += [file / _encode(run) for file, header in panels.items()
                      if run in _panel_runs(header)]
    return roots


def read(path: Path, *, hints: Mapping[str, object] | None = None) -> RawLog:
    """The points of one exported run (``hints["step_metric"]``: the step column)."""
    step_metric = (hints or {}).get("step_metric")
    root = _panel_root(path)
    if root is not None:
        return _read_panel(*root, step_metric)
    found = _exports(path)
    if [kind for kind, _ in found.values()] == ["api"]:
        return _read_api(next(iter(found)), step_metric)
    roots = expand(path)
    if len(roots) == 1:
        return read(roots[0], hints=hints)
    if not roots:
        raise InputError(f"{path}: no W&B export (a panel CSV with '<run> - <metric>' columns, "
                         "or API history with a _step column)")
    shown = ", ".join(root.name for root in roots[:5])
    raise InputError(f"{path}: holds {len(roots)} exported W&B runs ({shown}); pass one, or "
                     "give the folder to `runcompare` to compare them all")


# -- finding the exports ---------------------------------------------------------------------


def _exports(path: Path) -> dict[Path, tuple[str, list[str]]]:
    """The export files at ``path`` (the file itself, or the files directly in a folder), each
    with its kind and header (:func:`_kind`)."""
    candidates = [path] if is_file(path) else files_in(path)
    kinds = {p: _kind(p) for p in candidates if p.suffix.lower() in _SUFFIXES}
    return {p: (kind, header) for p, (kind, header) in kinds.items() if kind}


def _kind(file: Path) -> tuple[str | None, list[str]]:
    """``("api" | "panel" | None, column names)`` from the file's header."""
    try:
        header = _header(file)
    except (OSError, ValueError, UnicodeDecodeError, RecursionError, csv.Error,
            pl.exceptions.PolarsError):
        return None, []
    if _MARK in header and any(name in header for name in _W_AND_B):
        return "api", header
    if file.suffix.lower() == ".csv" and _panel_runs(header):
        return "panel", header
    return None, header


def _header(file: Path) -> list[str]:
    if file.suffix.lower() == ".parquet":
        return list(pl.read_parquet_schema(file))
    with file.open(encoding="utf-8", errors="replace", newline="") as handle:
        first = handle.readline(1 << 20)
    if file.suffix.lower() == ".csv":
        return next(csv.reader([first]), [])
    row = json.loads(first)
    return list(row) if isinstance(row, dict) else []


def _panel_runs(header: list[str]) -> list[str]:
    """The runs of a panel CSV header (x-axis column first, then ``<run> - <metric>``
    columns with their ``__MIN``/``__MAX`` companions), in column order; [] for any other."""
    if len(header) < 2:
        return []
    matches = [_PANEL.match(name) for name in header[1:] if name]  # an empty column: skipped
    if not all(matches) or not any(m["bound"] for m in matches if m):
        return []
    return list(dict.fromkeys(m["run"] for m in matches if m))


def _encode(run: str) -> str:
    return run.replace("%", "%25").replace("/", "%2F")


def _decode(segment: str) -> str:
    return segment.replace("%2F", "/").replace("%25", "%")


def _panel_root(path: Path) -> tuple[list[Path], str] | None:
    """``(panel files, run)`` when ``path`` is ``<panel csv>/<run>`` or ``<folder>/<run>`` (the
    folder's panel CSVs holding that run, all on one x-axis)."""
    parent = path.parent
    if exists(path) or not exists(parent):
        return None
    run = _decode(path.name)
    candidates = [parent] if is_file(parent) else (
        [p for p in files_in(parent) if p.suffix.lower() == ".csv"])
    panels = {file: header for file in candidates
              for kind, header in [_kind(file)] if kind == "panel" and run in _panel_runs(header)}
    if not panels or len({header[0] for header in panels.values()}) > 1:
        return None
    return list(panels), run


# -- reading ---------------------------------------------------------------------------------


def _table(file: Path, findings: list[Finding]) -> pl.DataFrame:
    """The file as a frame of text cells (null where empty), pandas' index column dropped;
    parsed once while unchanged (each run of a panel CSV is read from it). A CSV cut off inside
    a number loses that row, with a finding."""
    try:
        stat = file.stat()
    except OSError as exc:
        raise InputError(f"{file}: cannot be read ({exc.strerror})") from exc
    frame, cut = _parsed(file, stat.st_size, stat.st_mtime_ns)
    if cut is not None:
        findings.append(cut_finding(file, *cut))
    return frame


@lru_cache(maxsize=8)
def _parsed(file: Path, size: int, mtime_ns: int) -> tuple[pl.DataFrame, tuple[int, str] | None]:
    """:func:`_table` of ``file`` as it is at that size and modification time, and the line
    cut off inside a number (its number and text), which was not read."""
    suffix = file.suffix.lower()
    cut = None
    try:
        if suffix == ".csv":
            data, tail = without_cut_row(file.read_bytes())
            if tail:
                cut = (data.count(b"\n") + 1, tail.decode("utf-8", "replace"))
            frame = pl.read_csv(data, infer_schema=False, encoding="utf8-lossy")
            header = _header(file)  # the names as the csv module reads them ("" as ")
            if len(header) == frame.width and len(set(header)) == len(header):
                frame.columns = header
        elif suffix == ".parquet":
            frame = pl.read_parquet(file)
        else:
            frame = pl.read_ndjson(file, infer_schema_length=None)
    except (OSError, pl.exceptions.PolarsError, ValueError, csv.Error) as exc:
        raise InputError(f"{file}: not readable as W&B history ({exc.__class__.__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}); export it again "
                         "or pass the run folder") from exc
    frame = frame.drop([name for name in frame.columns if name in _INDEX])
    return frame.select(_as_text(name, dtype) for name, dtype in frame.schema.items()), cut


def _as_text(name: str, dtype: pl.DataType) -> pl.Expr:
    """A column as the texts W&B's history would hold: numbers as shortest round-trip text,
    nested objects as JSON (their numeric leaves become ``key/leaf`` metrics), the rest null."""
    column = pl.col(name)
    if dtype == pl.String:
        return column
    if isinstance(dtype, pl.Struct):
        return column.struct.json_encode()
    if dtype.is_numeric():
        return column.cast(pl.String)
    return pl.lit(None, pl.String).alias(name)


def _history(table: pl.DataFrame, columns: Mapping[str, str]) -> pl.DataFrame:
    """Rows of HISTORY_SCHEMA from ``table``'s ``columns`` (column → history key)."""
    long = (table.select(list(columns)).with_row_index("row")
            .unpivot(index="row", variable_name="key", value_name="value_json")
            .drop_nulls("value_json").sort("row", maintain_order=True))
    return with_values(long.with_columns(pl.col("key").replace_strict(dict(columns)))
                       .cast({"row": pl.Int64}))


def _read_api(file: Path, step_metric: object) -> RawLog:
    findings: list[Finding] = []
    table = _table(file, findings)
    leg = Leg(folder=file.parent, file=file,
              history=_history(table, {name: name for name in table.columns}))
    declared = next((name for name in _DECLARED if name in table.columns), None)
    if step_metric is None and declared is not None:
        leg.metrics.append({"glob_name": "*", "step_metric": declared})
        findings.append(Finding("info", "step-metric",
                                f"{file}: took {declared!r} as the optimizer step (the "
                                "integration that wrote it declares it; an export does not "
                                "keep the declaration); --set step_metric=KEY to choose "
                                "another"))
    scalars, unit, more, _ = history_scalars(
        [leg], None if step_metric is None else str(step_metric), file)
    return RawLog(path=file, scalars=scalars, step_unit=unit, facts={},
                  findings=findings + more, files=[file], aliases={}, name=file.stem)


def _read_panel(panels: list[Path], run: str, step_metric: object) -> RawLog:
    """One run of one or more panel CSVs on the same x-axis, their rows one after another."""
    first = panels[0]
    cut: list[Finding] = []
    tables = [_table(file, cut) for file in panels]
    x_axis = tables[0].columns[0]
    if _TIME_AXES.match(x_axis):
        raise InputError(f"{first}: the panel's x-axis is {x_axis!r}, a time, so its points "
                         "have no step; export the panel with Step (or a step metric) as its "
                         "x-axis, or export the run's history with the W&B API")
    step = LOG_STEP if x_axis == "Step" else x_axis
    if step_metric is not None and str(step_metric) != step:
        raise InputError(f"{first}: step_metric {step_metric!r} is not in a panel export, "
                         f"whose only step column is its x-axis {x_axis!r}")
    histories, spread, offset = [], 0, 0
    for table in tables:  # each table's rows after the previous one's
        metrics, spread_here = _panel_columns(table, run)
        metrics = {column: key for column, key in metrics.items() if key != step}
        history = _history(table, {x_axis: step, **metrics})
        histories.append(history.with_columns(pl.col("row") + offset))
        spread, offset = spread + spread_here, offset + table.height
    leg = Leg(folder=first.parent, file=first, history=pl.concat(histories))
    x_values = leg.history.filter(pl.col("key") == step).get_column("value").drop_nulls()
    if (x_values != x_values.round()).any() and not (leg.history["key"] == LOG_STEP).any():
        raise InputError(f"{first}: the panel's x-axis {x_axis!r} is not a step counter (it "
                         "has values that are not whole numbers) and the export has no _step "
                         "column; export the panel with Step (or the run's step metric) as "
                         "its x-axis")
    if step != LOG_STEP:
        leg.metrics.append({"glob_name": "*", "step_metric": step})
    scalars, unit, findings, _ = history_scalars([leg], None, first)
    findings = cut + findings
    where = first if len(panels) == 1 else first.parent
    if _EPOCH_AXIS.search(x_axis) and unit == "optimizer":  # whole epochs were the step
        unit = "epoch"
        findings.append(Finding("info", "step-is-epoch",
                                f"{where}: the panel's x-axis is {x_axis!r}, so its steps are "
                                "epochs, not optimizer steps (compare on --x epoch)"))
    if any(table.height == PANEL_ROWS for table in tables):
        findings.append(Finding("warning", "panel-cut",
                                f"{where}: the panel export holds {PANEL_ROWS:,} rows, the most "
                                "the W&B web app exports; the run may have logged more points "
                                "than these; export the history with the W&B API for every "
                                "point"))
    if step == LOG_STEP:  # the panel's x-axis is fixed: say how to export it on steps
        findings = [f for f in findings if f.code != "step-is-log-call"]
        findings.append(Finding("warning", "step-is-log-call",
                                f"{where}: the panel's x-axis is Step, W&B's _step, which "
                                "counts wandb.log() calls, not optimizer steps; export the "
                                "panel with the run's step metric (e.g. train/global_step) "
                                "as its x-axis, or the history with the W&B API"))
    if spread:
        findings.append(Finding("info", "panel-sampled",
                                f"{where}: {run!r} has {spread} values whose __MIN/__MAX "
                                "differ: the panel drew a sample of the run (or a group's "
                                "aggregate), each point standing for several; export the "
                                "history with the W&B API for every point"))
    if run.startswith("Group: "):
        findings.append(Finding("info", "panel-group",
                                f"{where}: {run!r} is the aggregate line of a W&B group as "
                                "the panel drew it, not one run"))
    return RawLog(path=where / _encode(run), scalars=scalars,
                  step_unit=unit, facts={}, findings=findings, files=panels, aliases={},
                  name=run.removeprefix("Group: "))


def _panel_columns(table: pl.DataFrame, run: str) -> tuple[dict[str, str], int]:
    """The run's metric columns of a panel table (column → metric), and how many of its
    values have a ``__MIN`` or ``__MAX`` that differs from them."""
    metrics: dict[str, str] = {}
    spread = 0
    for name in table.columns[1:]:
        match = _PANEL.match(name)
        if match is None or match["run"] != run:
            continue
        if match["bound"] is None:
            metrics[name] = match["metric"]
            continue
        value = pl.col(f"{run} - {match['metric']}").cast(pl.Float64, strict=False)
        spread += table.select((pl.col(name).cast(pl.Float64, strict=False) != value).sum()
                               ).item() or 0
    return metrics, spread


FORMAT = Format(
    "wandb-export",
    "W&B history exports: the web app's panel CSV, or the API's history as CSV, JSON lines or "
    "parquet",
    read=read, files=files, expand=expand, virtual=virtual)
