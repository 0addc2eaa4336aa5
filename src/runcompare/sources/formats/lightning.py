"""Lightning CSVLogger folders: <save_dir>/lightning_logs/version_N/metrics.csv + hparams.yaml.

Rows are sparse: each ``logger.log_metrics`` call is one row holding only the metrics of that
call (train step, validation, epoch end, LearningRateMonitor), with ``step`` and usually
``epoch``. Every filled cell is a point; nothing is deduplicated here.

Step: Lightning writes ``step`` = its count of optimizer steps *before* the one just done is
counted (0-based: the row after the first optimizer step says 0, validation after 8 updates
says 7). runcompare adds 1, so ``step`` = optimizer updates done, the HF Trainer's
convention; LearningRateMonitor rows (logged at batch start) land on the step of the update
that uses that learning rate. Rows of ``trainer.test()`` (only ``test_*`` metrics) are logged
after fit at the final count, already the updates done: they keep their step, and their
``epoch`` (epochs completed) is dropped. ``epoch`` is Lightning's 0-based epoch index (not a
fraction) and becomes ``train/epoch``.

Names (:data:`~runcompare.sources.naming.LIGHTNING`): ``train_loss_step`` → ``train/loss``, ``train_loss_epoch`` →
``train/loss_epoch``, ``val_loss`` → ``eval/loss``, ``test_acc`` → ``test/acc``,
``lr-AdamW`` → ``train/learning_rate``; others → ``train/<name>``. The logged name is kept as
an alias. Facts come from ``hparams.yaml`` (what the module saved with
``save_hyperparameters()``); Trainer arguments (accumulate_grad_batches, devices,
num_nodes) are not recorded there unless the module saved them too.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from ...errors import InputError
from ...model import RAW_SCHEMA, Fact, Finding, RawLog
from ..codecs.files import files_below, is_dir, is_file, natural
from ..config import hparams, load_yaml, nested_facts
from ..format import Format
from ..naming import LIGHTNING, canonical_names
from ..textlog.rows import record_lines

__all__ = ["FORMAT", "expand", "files", "hparams_facts", "read", "sniff"]

METRICS = "metrics.csv"
HPARAMS = "hparams.yaml"
#: Columns of metrics.csv that are not metrics.
_STEP, _EPOCH = "step", "epoch"
#: Bad lines reported by number before "and N more".
_SHOWN = 3


def sniff(path: Path) -> bool:
    return bool(_runs(path, limit=1))


def expand(path: Path) -> list[Path]:
    """One root per version folder under ``path`` (``path`` itself when it is one)."""
    return _runs(path) or [path]


def files(path: Path) -> list[Path]:
    """metrics.csv and, when present, hparams.yaml of the one run at ``path``."""
    runs = _runs(path)
    if len(runs) != 1:
        return []
    folder = runs[0] if is_dir(runs[0]) else runs[0].parent
    found = [folder / METRICS]
    return found + ([folder / HPARAMS] if is_file(folder / HPARAMS) else [])


def _runs(path: Path, limit: int | None = None) -> list[Path]:
    """Version folders (holding a metrics.csv with a ``step`` column) at ``path``, up to two
    levels down (``save_dir/lightning_logs/version_N``), in version order."""
    if is_file(path):
        return [path.parent] if path.name == METRICS and _has_step(path) else []
    if not is_dir(path):
        return []
    if _has_step(path / METRICS):
        return [path]
    found: list[Path] = []
    for depth in (1, 2):
        found += [f.parent for f in sorted(files_below(path, METRICS, depth)) if _has_step(f)]
        if limit is not None and len(found) >= limit:
            break
    return sorted(found, key=_version_key)


def _version_key(folder: Path) -> tuple[object, int, object]:
    match = re.fullmatch(r"version_(\d+)", folder.name)
    return (natural(folder.parent.as_posix()), int(match.group(1)) if match else -1,
            natural(folder.name))


def _has_step(file: Path) -> bool:
    if not is_file(file):  # a FIFO would block the read forever
        return False
    try:
        with file.open("rb") as handle:
            header = handle.readline(1 << 16)
    except OSError:
        return False
    return _STEP in _header(header.decode("utf-8", errors="replace"))


def _header(line: str) -> list[str]:
    try:
        return next(csv.reader([line.rstrip("\r\n")]), [])
    except csv.Error:  # a bare \r inside the line: no CSV header
        return []


def read(path: Path, *, hints: Mapping[str, object] | None = None) -> RawLog:
    """Every point of the metrics.csv at ``path`` (steps + 1, see the module docstring)."""
    runs = _runs(path)
    if not runs:
        raise InputError(f"{path}: no Lightning CSVLogger run (expected "
                         f"lightning_logs/version_N/{METRICS} with a step column)")
    if len(runs) > 1:
        shown = ", ".join(r.relative_to(path).as_posix() for r in runs[:5])
        raise InputError(f"{path}: holds {len(runs)} Lightning runs ({shown}); pass one "
                         "version folder, or give the folder to `runcompare` to compare them all")
    folder = runs[0]
    scalars, aliases, findings = _read_metrics(folder / METRICS)
    facts, settings, fact_findings = _facts(folder, hints or {})
    findings += fact_findings
    findings.append(Finding("info", "step-offset",
                            f"{folder / METRICS}: Lightning counts steps from 0 (logged before "
                            "the optimizer step just done is counted); runcompare adds 1, so "
                            "step = optimizer updates done"))
    return RawLog(path=path, scalars=scalars, step_unit="optimizer",
                  facts=facts, findings=findings, files=files(folder), aliases=aliases,
                  hparams=settings)


def _read_metrics(file: Path) -> tuple[pl.DataFrame, dict[str, str], list[Finding]]:
    lines, findings = record_lines(file)
    header = _header(lines.get_column("text")[0] if lines.height else "")
    lines = lines.filter(pl.col("line") > 1)
    if _STEP not in header:
        raise InputError(f"{file}: header has no `step` column ({', '.join(header[:8])}); not a "
                         "Lightning CSVLogger metrics.csv")
    fields = lines.with_columns(pl.col("text").str.split(",").alias("cells"))
    ok = pl.col("cells").list.len() == len(header)
    step = pl.col("cells").list.get(header.index(_STEP), null_on_oob=True)
    fields = fields.with_columns(step=step.cast(pl.Int64, strict=False))
    bad = fields.filter(~ok | pl.col("step").is_null())
    if bad.height:
        findings.append(_bad_lines(file, bad.get_column("line").to_list(), len(header)))
    rows = fields.filter(ok & pl.col("step").is_not_null())
    names = canonical_names([c for c in header if c != _STEP], LIGHTNING)
    frames = []
    for index, column in enumerate(header):
        if column == _STEP:
            continue
        text = pl.col("cells").list.get(index)
        frames.append(rows.select(
            pl.lit(names[column]).alias("metric"),
            text.cast(pl.Float64, strict=False).alias("value"),
            pl.col("step"), pl.lit(None, pl.Float64).alias("wall_time"),
            pl.lit(0, pl.Int32).alias("leg"), (text.is_not_null() & (text != "")).alias("filled"),
            pl.col("line"), pl.lit(_kind(column, names[column])).alias("kind")))
    if not frames:
        return pl.DataFrame(schema=RAW_SCHEMA), {}, findings
    points = pl.concat(frames).filter("filled")
    # rows of trainer.test() are logged outside fit at the final count: no offset for them
    test_row = ((pl.col("kind") == "test").any().over("line")
                & ~(pl.col("kind") == "metric").any().over("line"))
    points = (points.with_columns(step=pl.col("step") + pl.when(test_row).then(0).otherwise(1))
              .filter(~(test_row & (pl.col("kind") == "epoch"))))  # epochs done, not a position
    garbled = points.filter(pl.col("value").is_null())
    if garbled.height:
        findings.append(Finding("warning", "damaged-input",
                                f"{file}: {garbled.height} values are not numbers (first at "
                                f"line {garbled.get_column('line').min()!s}); skipped them"))
    scalars = (points.filter(pl.col("value").is_not_null()).sort("line", maintain_order=True)
               .select([pl.col(c).cast(t) for c, t in RAW_SCHEMA.items()]))
    if scalars.is_empty() and not findings:
        findings.append(Finding("warning", "no-points", f"{file}: no logged values yet"))
    aliases = {target: key for key, target in names.items() if target != key}
    return scalars, aliases, findings


def _kind(column: str, name: str) -> str:
    """``epoch``, ``test`` (a metric of trainer.test()) or ``metric``."""
    if column == _EPOCH:
        return "epoch"
    return "test" if name.startswith("test/") or column.startswith("test") else "metric"


def _bad_lines(file: Path, lines: list[int], width: int) -> Finding:
    shown = ", ".join(map(str, lines[:_SHOWN]))
    more = f" and {len(lines) - _SHOWN} more" if len(lines) > _SHOWN else ""
    return Finding("warning", "damaged-input",
                   f"{file}: {len(lines)} lines without {width} fields or a whole-number step "
                   f"(line {shown}{more}); skipped them")


def hparams_facts(file: Path) -> tuple[dict[str, Fact[Any]], dict[str, Fact[Any]]]:
    """Facts of kind ``config`` and every key (:func:`~..config.hparams`) of a Lightning
    ``hparams.yaml`` (any logger writes one, the TensorBoardLogger too); raises
    :class:`InputError` for a file that is not YAML."""
    config = load_yaml(file)
    if not isinstance(config, Mapping):
        return {}, {}
    return nested_facts(config, where=file.name), hparams(config, where=file.name)


def _facts(folder: Path, hints: Mapping[str, object]) -> tuple[
        dict[str, Fact[Any]], dict[str, Fact[Any]], list[Finding]]:
    file = folder / HPARAMS
    if not is_file(file):
        return {}, {}, [Finding("info", "no-config",
                                f"{folder}: no {HPARAMS}; pass the batch settings with --set "
                                "(per_device_batch, grad_accum, world_size, seq_len)")]
    try:
        facts, settings = hparams_facts(file)
    except InputError as exc:
        return {}, {}, [Finding("warning", "damaged-input", f"{exc}; read the points without it")]
    findings = []
    if "grad_accum" not in facts and "grad_accum" not in hints:
        findings.append(Finding(
            "info", "trainer-args-not-logged",
            f"{file} has no accumulate_grad_batches: Lightning saves only the module's "
            "save_hyperparameters(), not Trainer(accumulate_grad_batches=, devices=, "
            "num_nodes=); if they were not 1, pass --set RUN:grad_accum=N and world_size=N"))
    return facts, settings, findings


FORMAT = Format(
    "lightning",
    "Lightning CSVLogger folders: lightning_logs/version_N/metrics.csv and hparams.yaml",
    read=read, files=files, sniff=sniff, expand=expand)
