"""MLflow runs: a file store (mlruns/<experiment_id>/<run_id>/) or an SQLite store (mlflow.db).

File store: ``metrics/<key>`` holds one line per point, ``timestamp_ms value [step]``; MLflow
writes 3 fields, 5 with a dataset (``... step dataset_name dataset_digest``), 2 in files from
before steps existed (step 0). A key with ``/`` is a subfolder (``metrics/train/loss`` is
``train/loss``). ``params/<key>`` holds a value (facts), ``tags/mlflow.runName`` and
``meta.yaml`` (``run_name``, ``status``, ``lifecycle_stage``) the rest. SQLite: see
``mlflow_sqlite``.

Run roots (:func:`expand`): a file-store run is its folder. A run in an SQLite database is the
*virtual* path ``<db>/<run_id>`` (e.g. ``mlflow.db/4cc42ca6...``): it does not exist on disk,
its parent is the database file, and :func:`sniff`, :func:`files` and :func:`read` understand
it. Deleted runs (and runs of deleted experiments) are skipped. :func:`run_name` gives a run's
MLflow name cheaply; :func:`read` sets ``RawLog.name`` to it.

Step: whatever the script passed to ``log_metric(step=...)``; taken as optimizer steps (what
the HF Trainer's MLflowCallback passes; Lightning's MLFlowLogger passes its 0-based count, one
less) and said in an info finding. Names: the HF Trainer's keys (a run whose params hold
``per_device_train_batch_size``) as in its TensorBoard logs; otherwise as the Lightning source
names them (``val_loss`` → ``eval/loss``, ``lr`` → ``train/learning_rate``; keys with a
``/`` and an unknown first part stay as logged).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

import polars as pl

from ...errors import InputError
from ...model import RAW_SCHEMA, Finding, RawLog
from ..codecs.files import exists, files_below, is_dir, is_file
from ..config import hparams, load_yaml, nested_facts
from ..format import Format
from ..naming import LIGHTNING, PRINTED, TRAINER, canonical_names
from ..textlog.rows import record_lines
from ._mlflow_sqlite import (
    METRIC_SCHEMA,
    RunRecord,
    databases,
    is_database,
    pending,
    read_run,
    run_ids,
)
from ._mlflow_sqlite import run_name as _db_run_name

__all__ = ["FORMAT", "expand", "files", "read", "run_name", "sniff", "virtual"]

META = "meta.yaml"
_STORE_DIRS = ("metrics", "params", "tags")
_STATUS = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}
_HF_PARAM = "per_device_train_batch_size"
#: ``mlflow.autologging`` tag values of the autologgers that log once an epoch at step = the
#: epoch (0-based): the Keras callback's ``log_every_epoch=True``, their default.
_PER_EPOCH = {"tensorflow", "keras"}
_SHOWN = 3


def sniff(path: Path) -> bool:
    return _virtual(path) is not None or bool(_file_runs(path)) or bool(databases(path))


def virtual(path: Path) -> bool:
    """Whether ``path`` is ``<db>/<run_id>``, a run inside an SQLite database."""
    return _virtual(path) is not None


def expand(path: Path) -> list[Path]:
    """One root per live MLflow run at ``path``: file-store run folders, then ``<db>/<run_id>``
    for each run of each SQLite database (a damaged database is one root, whose read fails)."""
    if _virtual(path) is not None or _is_run_dir(path):
        return [path]
    roots = [run for run in _file_runs(path) if not _deleted(run)]
    for db in databases(path):
        try:
            roots += [db / run_id for run_id in run_ids(db)]
        except InputError:
            roots.append(db)
    return roots or [path]


def files(path: Path) -> list[Path]:
    """The files :func:`read` reads for the one run at ``path`` (the database for a db run)."""
    virtual = _virtual(path)
    if virtual is not None:
        return [virtual[0], *pending(virtual[0])]
    if _is_run_dir(path):
        found = [path / META]
        for sub in _STORE_DIRS:
            found += sorted(f for f in (path / sub).rglob("*") if is_file(f))
        return found
    roots = expand(path)
    return files(roots[0]) if len(roots) == 1 and roots[0] != path else []


def run_name(path: Path) -> str | None:
    """The MLflow name of the run at ``path`` (a run root from :func:`expand`), or None."""
    try:
        virtual = _virtual(path)
        if virtual is not None:
            return _db_run_name(*virtual)
        if _is_run_dir(path):
            return _file_run_name(path, _meta(path))
    except InputError:
        return None
    return None


def read(path: Path, *, hints: Mapping[str, object] | None = None) -> RawLog:
    """Every point, param fact and finding of the one MLflow run at ``path``."""
    root = _single_root(path)
    virtual = _virtual(root)
    if virtual is not None:
        record = read_run(*virtual)
        where, findings = f"{virtual[0].name} params", list(record.findings)
    else:
        record, findings = _read_file_run(root)
        where = "mlflow params"
    hf = _HF_PARAM in record.params
    per_epoch = record.tags.get("mlflow.autologging") in _PER_EPOCH
    names = canonical_names(
        record.metrics.get_column("key").unique(maintain_order=True).to_list(),
        TRAINER if hf else PRINTED if per_epoch else LIGHTNING)
    scalars = record.metrics.select(
        pl.col("key").replace_strict(names, return_dtype=pl.String).alias("metric"),
        "value", "step", _seconds(pl.col("timestamp")).alias("wall_time"),
        pl.lit(0, pl.Int32).alias("leg")).select([pl.col(c).cast(t)
                                                 for c, t in RAW_SCHEMA.items()])
    findings += _run_findings(root, record, hf, set(names))
    return RawLog(path=path, scalars=scalars, step_unit="epoch" if per_epoch else "optimizer",
                  facts=nested_facts(record.params, where=where), findings=findings,
                  files=files(root), aliases={t: k for k, t in names.items() if t != k},
                  name=record.name, hparams=hparams(record.params, where=where))


def _seconds(ms: pl.Expr) -> pl.Expr:
    """Milliseconds as seconds: whole seconds plus the fraction, which rounds like Python's
    ``ms / 1000`` (polars divides a column by multiplying with 0.001, often an ulp off)."""
    return (ms // 1000).cast(pl.Float64) + (ms % 1000).cast(pl.Float64) / 1000.0


def _single_root(path: Path) -> Path:
    roots = expand(path)
    if len(roots) == 1:
        root = roots[0]
        if is_file(root):
            run_ids(root)  # a database that expand could not list: raise its error
        if _virtual(root) is not None or _is_run_dir(root):
            return root
        raise InputError(f"{path}: no live MLflow run (expected mlruns/<experiment>/<run>/ "
                         "with meta.yaml, or an mlflow.db); deleted runs are not read")
    shown = ", ".join(_describe(r, path) for r in roots[:5])
    more = f" and {len(roots) - 5} more" if len(roots) > 5 else ""
    raise InputError(f"{path}: holds {len(roots)} MLflow runs ({shown}{more}); pass one run, "
                     "or give the folder to `runcompare` to compare them all")


def _describe(root: Path, base: Path) -> str:
    name = run_name(root)
    try:
        where = root.relative_to(base).as_posix()
    except ValueError:
        where = root.name
    return f"{name} ({where})" if name else where


def _virtual(path: Path) -> tuple[Path, str] | None:
    """``(db, run_id)`` when ``path`` is ``<db>/<run_id>`` for an MLflow SQLite ``db``."""
    parent = path.parent
    if exists(path) or not is_file(parent) or not is_database(parent):
        return None
    return parent, path.name


# -- file store ----------------------------------------------------------------------------


def _is_run_dir(path: Path) -> bool:
    """A folder with meta.yaml naming itself as ``run_id`` (or ``run_uuid``)."""
    meta = path / META
    if not is_file(meta) or not any(is_dir(path / sub) for sub in _STORE_DIRS):
        return False
    try:
        text = meta.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return re.search(rf"^run_(?:id|uuid): '?{re.escape(path.name)}'?\s*$", text,
                     re.MULTILINE) is not None


def _file_runs(path: Path) -> list[Path]:
    """Run folders at ``path``: itself, or those of an experiment folder, an ``mlruns`` folder
    or a folder holding ``mlruns/``; ``.trash`` and other hidden folders are skipped."""
    if not is_dir(path):
        return []
    if _is_run_dir(path):
        return [path]
    found: dict[Path, None] = {}
    for base in (path, path / "mlruns"):
        for depth in (1, 2):
            for meta in sorted(files_below(base, META, depth)):
                run = meta.parent
                hidden = any(p.startswith(".") for p in run.relative_to(path).parts)
                if not hidden and _is_run_dir(run) and not _experiment_deleted(run.parent):
                    found.setdefault(run)
    return sorted(found, key=_start_time)


def _meta(run: Path) -> dict[str, Any]:
    meta = load_yaml(run / META)
    return meta if isinstance(meta, dict) else {}


def _deleted(run: Path) -> bool:
    try:
        return _meta(run).get("lifecycle_stage") == "deleted"
    except InputError:
        return False


def _experiment_deleted(folder: Path) -> bool:
    if not is_file(folder / META):
        return False
    try:
        meta = load_yaml(folder / META)
    except InputError:
        return False
    return isinstance(meta, dict) and meta.get("lifecycle_stage") == "deleted"


def _start_time(run: Path) -> tuple[int, str]:
    try:
        start = _meta(run).get("start_time")
    except InputError:
        start = None
    return (start if isinstance(start, int) else 0, run.as_posix())


def _file_run_name(run: Path, meta: Mapping[str, Any]) -> str | None:
    tag = run / "tags" / "mlflow.runName"
    if is_file(tag):
        name = tag.read_text(encoding="utf-8", errors="replace").strip()
        if name:
            return name
    given = meta.get("run_name")
    return str(given) if given else None


def _read_file_run(run: Path) -> tuple[RunRecord, list[Finding]]:
    metrics, findings = _read_metric_files(run / "metrics")
    try:
        meta = _meta(run)
    except InputError as exc:
        meta = {}
        findings.append(Finding("warning", "damaged-input", f"{exc}; read the run without it"))
    status = meta.get("status")
    experiment = None
    if is_file(run.parent / META):
        with suppress(InputError):
            exp_meta = load_yaml(run.parent / META)
            experiment = exp_meta.get("name") if isinstance(exp_meta, dict) else None
    record = RunRecord(run_id=str(meta.get("run_id") or run.name),
                       name=_file_run_name(run, meta), experiment=experiment,
                       status=_STATUS.get(status, str(status)) if status is not None else None,
                       deleted=meta.get("lifecycle_stage") == "deleted", metrics=metrics,
                       params=_values(run / "params"), tags=_values(run / "tags"))
    return record, findings


def _values(folder: Path) -> dict[str, str]:
    """``key -> file content`` for every file under ``folder`` (keys with ``/`` nest)."""
    if not is_dir(folder):
        return {}
    return {f.relative_to(folder).as_posix(): f.read_text(encoding="utf-8", errors="replace")
            for f in sorted(folder.rglob("*")) if is_file(f)}


def _read_metric_files(folder: Path) -> tuple[pl.DataFrame, list[Finding]]:
    """Every line of every metric file, parsed in bulk; bad lines reported by file and line."""
    frames: list[pl.DataFrame] = []
    findings: list[Finding] = []
    for file in sorted(f for f in folder.rglob("*") if is_file(f)) if is_dir(folder) else []:
        if file.stat().st_size == 0:  # a metric created with no point yet
            continue
        lines, damage = record_lines(file)
        findings += damage
        key = file.relative_to(folder).as_posix()
        frames.append(lines.with_columns(key=pl.lit(key), file=pl.lit(str(file))))
    if not frames:
        return pl.DataFrame(schema=METRIC_SCHEMA), findings
    lines = pl.concat(frames)
    parts = pl.col("text").str.strip_chars().str.split(" ")
    count = parts.list.len()
    parsed = lines.with_columns(
        timestamp=parts.list.get(0).cast(pl.Int64, strict=False),
        value=parts.list.get(1, null_on_oob=True).cast(pl.Float64, strict=False),
        step=pl.when(count >= 3).then(parts.list.get(2, null_on_oob=True)
                                      .cast(pl.Int64, strict=False)).otherwise(0),
        fields=count)
    good = (pl.col("fields").is_between(2, 5) & pl.col("timestamp").is_not_null()
            & pl.col("value").is_not_null() & pl.col("step").is_not_null())
    bad = parsed.filter(~good)
    if bad.height:
        shown = "; ".join(f"{r['file']} line {r['line']}"
                          for r in bad.head(_SHOWN).iter_rows(named=True))
        more = f" and {bad.height - _SHOWN} more" if bad.height > _SHOWN else ""
        findings.append(Finding("warning", "damaged-input",
                                f"{bad.height} MLflow metric lines are not `timestamp value "
                                f"[step]` ({shown}{more}); skipped them"))
    return parsed.filter(good).select(list(METRIC_SCHEMA)), findings


# -- findings ------------------------------------------------------------------------------


def _run_findings(root: Path, record: RunRecord, hf: bool, keys: set[str]) -> list[Finding]:
    label = f"MLflow run {record.name or record.run_id!r}"
    findings: list[Finding] = []
    if record.deleted:
        findings.append(Finding("warning", "deleted-run",
                                f"{label} is deleted in MLflow ({root}); read it anyway"))
    if record.status and record.status != "FINISHED":
        findings.append(Finding("info", "run-status",
                                f"{label} has status {record.status} (RUNNING after the job "
                                "ended means it was killed before MLflow could end the run)"))
    if hf:
        return findings
    autolog = record.tags.get("mlflow.autologging")
    if autolog in _PER_EPOCH:
        findings.append(Finding(
            "info", "step-is-epoch",
            f"{label} was written by mlflow.{autolog}.autolog (tag mlflow.autologging), "
            "which logs once an epoch with step = the epoch (its default, log_every_epoch); "
            "the step unit is epochs, not optimizer steps (compare on --x epoch)"))
        return findings
    lightning_like = "epoch" in keys and any(k.endswith(("_step", "_epoch")) for k in keys)
    why = (" (it looks like Lightning's MLFlowLogger, whose steps are one less than the "
           "updates done)" if lightning_like else "")
    findings.append(Finding("info", "step-unit-assumed",
                            f"{label}: MLflow stores the step the script passed to "
                            f"log_metric; taken as optimizer steps{why}"))
    return findings


FORMAT = Format(
    "mlflow",
    "MLflow runs: a file store (mlruns/<experiment>/<run>/) or an SQLite store (mlflow.db)",
    read=read, files=files, sniff=sniff, expand=expand, virtual=virtual)
