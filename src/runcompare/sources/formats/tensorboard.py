"""TensorBoard event files (any file whose name contains ``tfevents``), every scalar point.

Which files make one run (the rule :func:`expand` and :func:`read` follow)
--------------------------------------------------------------------------
TensorBoard shows every folder that holds event files as a run, named by its path under the
logdir. runcompare does the same, with two kinds of folder that belong to their parent:

* **Restart folders** named like ``Nov29_10-00-07_<host>`` (``%b%d_%H-%M-%S_<host>``: the
  default of ``torch.utils.tensorboard.SummaryWriter`` and of the HF Trainer, which makes a new
  one per restart under ``<output_dir>/runs/``). All such folders in one parent are the legs of
  one run, owned by that parent, or by the parent of a ``runs/`` folder (so an HF output dir
  is one run, named after it). Several independent scripts logged to ``runs/`` with the
  default names look the same: pass each folder on its own to compare them (a finding says
  when a later leg starts again from the beginning, the sign of a separate run).
* **hparams folders** named by a Unix time (``1732874512.123``), which
  ``SummaryWriter.add_hparams`` creates beside the run's own files: their hparams are facts
  of the run and their points join the leg being written at that time.

Folders named ``wandb`` (which keep copies of synced event files) and hidden folders are not
searched. A path that holds several runs is split by :func:`expand` (``load_many`` and the
CLI); :func:`read` of such a path says to pick one.

Legs (restarts) and what they orphan
------------------------------------
Files of a run are ordered by the wall time of their first event. Each file is a new leg,
unless it began before the previous leg's last event (two writers at once, e.g. one file per
DDP rank) or logs only tags that no earlier file logged (it cannot have re-logged anything):
then it continues the leg and nothing is orphaned between them. A ``SessionLog.START``
(written by ``SummaryWriter(purge_step=s)``) always starts a new leg whose start is s, so
``legs.resolve_legs`` drops earlier points at step ≥ s; without one a leg starts at its first
logged step (the HF Trainer resumes without it). Every point is kept here; dropping is the
shared mechanism's job.

Facts: HF's ``args/text_summary`` (TrainingArguments as JSON; the latest leg's) and the hparams
plugin's session values, both as run configuration; HF's logged end-of-training rates
``train/train_samples_per_second`` and ``train/train_steps_per_second`` (the latest pair),
from which ``resolve`` may infer the global batch, as logged facts.
``model_config/text_summary`` gives none: its lengths (``max_position_embeddings``) are
limits, not what the run used.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ...errors import InputError, NoLogsFoundError
from ...facts import facts_from_config
from ...model import RAW_SCHEMA, Fact, Finding, RawLog
from ..codecs.files import is_dir, is_file, natural, read_file
from ..config import hparams
from ..format import Format
from ._tensorboard_events import EventFile, decode

__all__ = ["FORMAT", "expand", "files", "read"]

MARK = "tfevents"
_RESTART_DIR = re.compile(r"^[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_.+$")
_HPARAMS_DIR = re.compile(r"^\d{9,11}\.\d+$")
_SKIP_DIRS = {"wandb", "__pycache__", "node_modules"}
ARGS_TAG = "args/text_summary"
#: HF's end-of-training rates (tag -> fact name), as hf_trainer reports them.
_RATES = {"train/train_samples_per_second": "train_samples_per_second",
          "train/train_steps_per_second": "train_steps_per_second"}


def files(path: Path) -> list[Path]:
    """Every event file under ``path`` (the file itself if it is one), sorted."""
    if is_file(path):
        return [path] if MARK in path.name else []
    if not is_dir(path):
        return []
    found: list[Path] = []
    for folder, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        # regular files only: a FIFO named like an event file would block the read forever
        found += [Path(folder) / name for name in sorted(names)
                  if MARK in name and is_file(Path(folder) / name)]
    return found


def expand(path: Path) -> list[Path]:
    """The run roots under ``path``: one per folder of event files, except that restart
    folders and hparams folders belong to their parent run (see the module docstring), in
    natural order (``lr_2`` before ``lr_10``)."""
    return sorted(_runs(path), key=lambda root: natural(root.as_posix()))


def _runs(path: Path) -> dict[Path, list[Path]]:
    """Run root -> its event files."""
    runs: dict[Path, list[Path]] = {}
    for file in files(path):
        runs.setdefault(_owner(file.parent, path), []).append(file)
    return runs


def _owner(folder: Path, base: Path) -> Path:
    """The root of the run that files in ``folder`` (at or under ``base``) belong to."""
    if folder == base or is_file(base):
        return base
    if _HPARAMS_DIR.match(folder.name):
        return _owner(folder.parent, base)
    if _RESTART_DIR.match(folder.name):
        parent = folder.parent
        if parent.name == "runs" and parent != base:
            parent = parent.parent
        return parent
    return folder


def read(path: Path, *, hints: Mapping[str, object] | None = None) -> RawLog:
    """Every scalar of the run at ``path``, each file a leg (see the module docstring).

    ``hints`` are part of the source protocol; event files need none to be read.
    """
    runs = _runs(path)
    if not runs:
        raise NoLogsFoundError(f"{path}: no TensorBoard event files (names containing "
                               f"'{MARK}'); point runcompare at the folder TensorBoard reads")
    if len(runs) > 1:
        names = ", ".join(sorted(_relative(root, path) for root in runs))
        raise InputError(f"{path} holds {len(runs)} TensorBoard runs ({names}); pass one of "
                         "them, or compare them all with `runcompare PATH` / load_many()")
    (root, event_files), = runs.items()
    decoded = _decode_all(event_files)
    legs = _legs(root, decoded)
    findings = _findings(root, decoded, legs)
    if all(not d.events.events for d in decoded) and any(d.events.damage for d in decoded):
        bad = next(d for d in decoded if d.events.damage)
        offset, reason = bad.events.damage[0]
        raise InputError(f"{path}: no readable TensorBoard event in {len(decoded)} file(s) "
                         f"({bad.path.name}, byte {offset}: {reason}); check that files "
                         f"whose names contain '{MARK}' are TensorBoard event files")
    frames = [_with_leg(d, legs) for d in legs.order]
    scalars = frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical")
    if scalars.is_empty():
        findings.append(Finding("warning", "no-scalars",
                                f"{path}: no scalar in {len(decoded)} event file(s) yet"))
    tags = set().union(*(d.events.tags for d in legs.order))
    scalars, aliases = _epoch_axis(scalars, tags)
    unit = _step_unit(tags)
    if unit == "epoch":
        findings.append(Finding("info", "step-is-epoch",
                                f"{path}: every tag is a Keras epoch_* tag, logged once an epoch "
                                "with step = epoch; the step unit is epochs, not optimizer "
                                "steps (compare on --x epoch)"))
    return RawLog(path=path, scalars=scalars, step_unit=unit,
                  facts=_facts(legs.order), findings=findings,
                  files=[d.path for d in legs.order], leg_starts=legs.starts, aliases=aliases,
                  hparams=_hparams(legs.order))


def _epoch_axis(scalars: pl.DataFrame, tags: set[str]) -> tuple[pl.DataFrame, dict[str, str]]:
    """An ``epoch`` tag (Lightning's TensorBoardLogger and Keras log one beside the metrics) as
    the epoch axis (``train/epoch``), unless the run also logs ``train/epoch`` itself."""
    if "epoch" not in tags or "train/epoch" in tags:
        return scalars, {}
    metric = pl.col("metric")
    renamed = scalars.with_columns(metric=pl.when(metric == "epoch").then(pl.lit("train/epoch"))
                                   .otherwise(metric))
    return renamed, {"train/epoch": "epoch"}


def _step_unit(tags: set[str]) -> str:
    """``epoch`` when every tag is a Keras ``epoch_*`` tag (step = epoch), else ``optimizer``."""
    keras = bool(tags) and all(tag.startswith("epoch_") for tag in tags)
    return "epoch" if keras else "optimizer"


def _relative(root: Path, base: Path) -> str:
    try:
        return root.relative_to(base).as_posix()
    except ValueError:
        return root.name


@dataclass
class _Decoded:
    path: Path
    events: EventFile
    attached: bool


def _decode_all(event_files: list[Path]) -> list[_Decoded]:
    plugins: dict[str, str] = {}
    out = []
    for file in event_files:
        try:
            data = read_file(file, in_place=False)  # the decoder only reads it
        except PermissionError as exc:  # the loader names it (passed-over); the others are read
            if len(event_files) == 1:
                raise InputError(f"{file}: cannot be read ({exc.strerror}); check its "
                                 "permissions") from exc
            continue
        except OSError as exc:
            raise InputError(f"{file}: cannot be read ({exc.strerror}); check its "
                             "permissions") from exc
        attached = bool(_HPARAMS_DIR.match(file.parent.name))
        out.append(_Decoded(file, decode(data, plugins), attached))
    return out


@dataclass
class _Legs:
    """Files in leg order, each file's leg, the START boundaries inside files, leg starts."""

    order: list[_Decoded]
    first: dict[Path, int]
    splits: dict[Path, list[int]]
    starts: dict[int, int]
    concurrent: list[tuple[Path, Path]]


def _legs(root: Path, decoded: list[_Decoded]) -> _Legs:
    """Number the legs of a run in time order (the rule is in the module docstring)."""
    main = sorted((d for d in decoded if not d.attached), key=_when)
    legs = _Legs([], {}, {}, {}, [])
    leg, leg_end, leg_file = -1, float("-inf"), None
    seen: set[str] = set()
    for d in main:
        ev = d.events
        points = ev.scalars.get_column("event")
        first_point = int(points.min()) if points.len() else None  # type: ignore[arg-type]
        opens = [s for s in ev.starts if first_point is None or s[0] < first_point]
        inner = [s for s in ev.starts if s not in opens]
        tags = ev.tags
        began = ev.first_wall if ev.first_wall is not None else leg_end
        if leg >= 0 and not opens and began < leg_end:
            if tags:  # a file of no scalars (Keras' profile-empty marker) overlaps nothing
                legs.concurrent.append((leg_file or d.path, d.path))
            leg_end = max(leg_end, ev.last_wall or leg_end)
        elif leg < 0 or opens or tags & seen:
            leg, leg_file, leg_end = leg + 1, d.path, ev.last_wall or began
            if opens:
                legs.starts[leg] = opens[-1][1]
        else:  # logs nothing an earlier leg logged: it cannot orphan anything
            leg_end = max(leg_end, ev.last_wall or leg_end)
        seen |= tags
        legs.first[d.path] = leg
        legs.splits[d.path] = [event for event, _ in inner]
        for _, step in inner:
            leg += 1
            legs.starts[leg] = step
        legs.order.append(d)
    for d in sorted((d for d in decoded if d.attached), key=_when):
        legs.first[d.path] = _leg_at(legs, main, d.events.first_wall)
        legs.splits[d.path] = []
        legs.order.append(d)
    return legs


def _when(d: _Decoded) -> tuple[float, str]:
    """Order of files: first event's wall time, then name (whose number is the start time)."""
    wall = d.events.first_wall
    return (wall if wall is not None else float("inf"), d.path.name)


def _leg_at(legs: _Legs, main: list[_Decoded], wall: float | None) -> int:
    """The leg being written at ``wall`` (the last main file that began before it)."""
    leg = 0
    for d in main:
        if wall is not None and d.events.first_wall is not None and d.events.first_wall <= wall:
            leg = legs.first[d.path] + len(legs.splits[d.path])
    return leg


def _with_leg(d: _Decoded, legs: _Legs) -> pl.DataFrame:
    frame = d.events.scalars
    splits = np.asarray(legs.splits[d.path], np.int64)
    leg = legs.first[d.path] + np.searchsorted(splits, frame.get_column("event").to_numpy(),
                                               side="right")
    return frame.select(
        pl.col("metric"), pl.col("value"), pl.col("step"), pl.col("wall_time"),
        pl.Series("leg", leg.astype(np.int32), RAW_SCHEMA["leg"]))


def _facts(order: list[_Decoded]) -> dict[str, Fact[Any]]:
    facts: dict[str, Fact[Any]] = {}
    for d in order:
        if d.events.hparams:
            facts.update(facts_from_config(d.events.hparams, where="tensorboard hparams",
                                           kind="config"))
    args = _args(order)
    if args is not None:
        facts.update(facts_from_config(args, where=f"tensorboard {ARGS_TAG}", kind="config"))
    facts.update(_rates(order))
    return facts


def _hparams(order: list[_Decoded]) -> dict[str, Fact[Any]]:
    """Every key of the hparams plugin's values and of the latest leg's TrainingArguments (those
    win a key both hold, as in :func:`_facts`)."""
    found: dict[str, Fact[Any]] = {}
    for d in order:
        found.update(hparams(d.events.hparams, where="tensorboard hparams"))
    found.update(hparams(_args(order) or {}, where=f"tensorboard {ARGS_TAG}"))
    return found


def _rates(order: list[_Decoded]) -> dict[str, Fact[Any]]:
    """HF's end-of-training rates (the latest pair logged at one step), from which ``resolve``
    may infer the global batch; each as the shortest decimal its float32 stands for."""
    frames = [d.events.scalars for d in order if not d.attached]
    if not frames:  # only an hparams folder's file (add_hparams), given on its own
        return {}
    points = frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical")
    rates = points.filter(pl.col("metric").is_in(list(_RATES)))
    if rates.is_empty():
        return {}
    rates = (rates.sort("wall_time", "event", maintain_order=True)
             .group_by("metric").agg(pl.col("value").last(), pl.col("step").last()))
    found = {row["metric"]: row for row in rates.iter_rows(named=True)}
    if len(found) < len(_RATES) or len({row["step"] for row in found.values()}) > 1:
        return {}
    return {name: Fact(float(str(np.float32(found[tag]["value"]))),
                       f"tensorboard {tag} at step {found[tag]['step']}", "logged")
            for tag, name in _RATES.items()}


def _args(order: list[_Decoded]) -> dict[str, Any] | None:
    """The latest leg's TrainingArguments (HF writes them at the start of every leg)."""
    for d in reversed(order):
        text = d.events.texts.get(ARGS_TAG)
        if text is None:
            continue
        try:
            args = json.loads(text)
        except ValueError:
            continue
        if isinstance(args, dict):
            return args
    return None


def _findings(root: Path, decoded: list[_Decoded], legs: _Legs) -> list[Finding]:
    findings = [finding for d in decoded for finding in _damage(d)]
    skipped: Counter[str] = Counter()
    for d in decoded:
        skipped.update(d.events.skipped)
        skipped["text"] += sum(n for tag, n in d.events.text_rows.items() if tag != ARGS_TAG)
    skipped = Counter({k: v for k, v in skipped.items() if v})
    if skipped:
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(skipped.items()))
        findings.append(Finding("info", "non-scalar-skipped",
                                f"{sum(skipped.values())} non-scalar summaries not read "
                                f"({kinds})"))
    findings += [Finding("info", "concurrent-writers",
                         f"{b.name} was written while {a.name} was (one writer per process?); "
                         "both are kept as one leg, nothing orphaned between them")
                 for a, b in legs.concurrent]
    findings += _fresh_starts(root, legs)
    return findings


def _damage(d: _Decoded, shown: int = 3) -> list[Finding]:
    """One warning per damaged stretch of a file, the first few of them and then a count."""
    damage = d.events.damage
    out = [Finding("warning", "damaged-input",
                   f"{d.path}: byte {offset}: {reason}; everything readable around it is kept")
           for offset, reason in damage[:shown]]
    if len(damage) > shown:
        out.append(Finding("warning", "damaged-input",
                           f"{d.path}: {len(damage) - shown} more damaged stretches, bytes "
                           f"{damage[shown][0]} to {damage[-1][0]}; everything readable "
                           "around them is kept"))
    return out


def _fresh_starts(root: Path, legs: _Legs) -> list[Finding]:
    """Legs that start again at or before the step where the leg before them started."""
    firsts: dict[int, tuple[int, Path]] = {}
    for d in legs.order:
        frame = d.events.scalars
        if d.attached or not frame.height:
            continue
        leg = legs.first[d.path]
        step = int(frame.get_column("step").min())  # type: ignore[arg-type]
        if leg not in firsts or step < firsts[leg][0]:
            firsts[leg] = (step, d.path)
    out = []
    for leg in sorted(firsts)[1:]:
        step, file = firsts[leg]
        before = max((k for k in firsts if k < leg), default=None)
        if before is not None and step <= firsts[before][0] and leg not in legs.starts:
            out.append(Finding(
                "info", "leg-restarts-from-scratch",
                f"{_relative(file, root)} starts again at step {step} (the leg before started "
                f"at {firsts[before][0]}), so it overrides all that leg logged: if it is a "
                "separate run rather than a restart, give it its own folder and pass each "
                "folder on its own (or use --duplicates all)"))
    return out


FORMAT = Format(
    "tensorboard",
    "TensorBoard event files (a file whose name contains tfevents), every scalar point",
    read=read, files=files, expand=expand)
