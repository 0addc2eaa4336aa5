"""OpenMMLab runs (mmengine: mmdetection 3.x, mmpretrain, mmsegmentation 1.x, mmpose 1.x,
mmagic, ...): the JSON lines ``LocalVisBackend`` appends to ``<work_dir>/<timestamp>/vis_data/
scalars.json`` (and to ``<timestamp>.json`` beside it), with the config dump ``config.py``.

What the writer puts in a line (``mmengine.hooks.LoggerHook`` and ``runner.loops``, checked
against mmengine's source):

- a train line every ``interval`` iterations, ``add_scalars(tag, step=runner.iter + 1)``: the
  scalars of the log processor (``lr``, ``base_lr``, ``loss``, ``loss_*``, ``grad_norm``,
  ``time``, ``data_time``, ``memory``), ``iter`` (= ``step``), and ``epoch`` (the epoch in
  progress, 1-based) when the log processor counts by epoch;
- a validation line after each validation, ``after_val_epoch``: the evaluator's metrics
  (``accuracy/top1``, ``coco/bbox_mAP``, ``mIoU``, ...) and no ``iter``. Its ``step`` is
  ``runner.epoch`` (epochs done) when ``log_metric_by_epoch`` (the default), else
  ``runner.iter`` (iterations done).

``runner.iter`` counts ``train_step`` calls, one batch each (``run_iter``: ``self._iter +=
1``); the optimizer wrapper steps on every ``accumulative_counts``-th call
(``OptimWrapper.should_update``). So a step here counts micro-batches (unit ``micro``), which
the config's ``optim_wrapper.accumulative_counts`` turns into optimizer steps
(:mod:`._mmengine_config`).

An epoch-numbered validation line is put at the iteration its epoch ended: ``E × N`` where the
train lines show ``N`` iterations an epoch (the last train lines of two or more whole epochs N
apart, each within its epoch: :func:`_iterations_an_epoch`). When that is not known, or a step fits neither reading (an iteration-based run whose ``step`` is
``runner.epoch``, always 0), the line is left out and a finding says so. A train ``iter`` that
goes back is a new leg: a run started again in the same folder, or resumed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from ...errors import InputError
from ...model import Fact, Finding, RawLog
from ..codecs.files import files_in, is_dir, is_file, roots_under
from ..format import Format
from ..naming import PRINTED, canonical_names
from ..textlog.points import to_raw
from ..textlog.records import numbers, read_records, record_rows
from ._mmengine_config import CONFIG, config_facts

__all__ = ["FORMAT", "expand", "files", "read"]

LOG = "scalars.json"
#: The folder LocalVisBackend writes into, and the per-run copy of its log in older layouts.
_VIS = "vis_data"
_STAMPED = re.compile(r"\d{8}_\d{6}\.json")
#: Keys of a train line that are its position, not metrics.
_POSITION = {"step", "iter", "epoch"}
#: Marks a validation line's keys apart from the train lines' (both have ``time``).
_VAL = "val:"
#: Bytes of a file looked at to tell an mmengine log from another JSON file.
_HEAD = 1 << 16


def files(path: Path) -> list[Path]:
    """The scalars log at ``path`` (the file; a ``vis_data`` folder; a run folder holding
    one; a folder holding one such run further down), with the config dump beside it when
    there is one."""
    here = _files_here(path)
    if here or not is_dir(path):
        return here
    below = expand(path)
    return _files_here(below[0]) if len(below) == 1 else []


def _files_here(path: Path) -> list[Path]:
    """:func:`files` of the run at ``path`` itself."""
    try:
        if is_file(path):
            if not (_is_log_name(path) and _is_mmengine(path)):
                return []
            config = path.parent / CONFIG
            return [path] + ([config] if path.parent.name == _VIS and is_file(config) else [])
        vis = path if path.name == _VIS else path / _VIS
        if not is_dir(vis):
            return []
        found = [file for file in files_in(vis) if file.name == LOG] or \
            [file for file in files_in(vis) if _STAMPED.fullmatch(file.name)][-1:]
        if not found or not _is_mmengine(found[0]):
            return []
        config = vis / CONFIG
        return found + ([config] if is_file(config) else [])
    except OSError:  # a folder under one this user may not read
        return []


def expand(path: Path) -> list[Path]:
    """The runs at ``path``: itself when it holds an mmengine log, else the run folders
    further down (``work_dirs/<config>/<timestamp>/``)."""
    if _files_here(path):
        return [path]
    return roots_under(path, lambda folder: bool(_files_here(folder))) if is_dir(path) else []


def _is_log_name(file: Path) -> bool:
    return file.name == LOG or bool(_STAMPED.fullmatch(file.name))


def _is_mmengine(file: Path) -> bool:
    """Whether the first line of ``file`` is an object with a whole ``step`` (and no
    ``iteration``: detectron2's)."""
    with file.open("rb") as handle:
        first = handle.read(_HEAD).split(b"\n", 1)[0]
    try:
        record = json.loads(first)
    except ValueError:
        return False
    return (isinstance(record, dict) and _whole(record.get("step"))
            and "iteration" not in record)


def read(path: Path, *, hints: Mapping[str, object] | None = None) -> RawLog:
    """Every point of the mmengine scalars log at ``path``."""
    found = files(path)
    if not found:
        raise InputError(f"{path}: no mmengine vis_data/{LOG} found (lines like "
                         "{\"lr\": 0.02, \"loss\": 1.71, \"epoch\": 1, \"iter\": 69, \"step\": 69})")
    log_file = found[0]
    log = read_records(log_file)
    placed = _place(log.objects)
    if not placed.rows:
        raise InputError(f"{log_file}: no train or validation line with a step and a number")
    rows, keys = record_rows(placed.rows)
    names = _names(keys)
    facts: dict[str, Fact[Any]] = {}
    hparams: dict[str, Fact[Any]] = {}
    if len(found) > 1:
        facts, hparams = config_facts(found[1])
    return RawLog(path=path, scalars=to_raw(rows, names), step_unit="micro",
                  facts=facts, hparams=hparams, files=found,
                  findings=log.findings("mmengine log lines") + placed.findings(log_file),
                  aliases={name: key.removeprefix(_VAL) for key, name in names.items()
                           if name != key.removeprefix(_VAL)})


def _names(keys: list[str]) -> dict[str, str]:
    """Canonical names: train keys as :func:`canonical_names` has them (``loss`` ->
    ``train/loss``, ``lr`` -> ``train/learning_rate``); validation keys as logged where they
    name their evaluator (``coco/bbox_mAP``), else under ``eval/`` (``mIoU`` ->
    ``eval/mIoU``, the validation's ``time`` -> ``eval/time``)."""
    train = canonical_names([key for key in keys if not key.startswith(_VAL)], PRINTED)
    return {key: train.get(key) or _val_name(key) for key in keys}


def _val_name(key: str) -> str:
    bare = key.removeprefix(_VAL)
    return bare if "/" in bare else f"eval/{bare}"


@dataclass
class _Placed:
    """The lines kept as (line, step, numbers), and the validation lines left out."""

    rows: list[tuple[int, int, dict[str, float]]] = field(default_factory=list)
    by_epoch: dict[int, int] = field(default_factory=dict)  # leg -> iterations an epoch
    unknown_epoch: list[int] = field(default_factory=list)
    misfit: list[int] = field(default_factory=list)

    def findings(self, file: Path) -> list[Finding]:
        out = []
        if self.by_epoch:
            per = sorted(set(self.by_epoch.values()))
            out.append(Finding("info", "eval-step-from-epoch",
                               f"{file}: validation lines number their step by epoch; each is "
                               f"put at the iteration its epoch ended (epoch × "
                               f"{' or '.join(map(str, per))} iterations, from the train lines)"))
        if self.unknown_epoch:
            out.append(Finding("warning", "eval-step-unknown",
                               f"{file}: {_count(self.unknown_epoch)} number their step by epoch "
                               "and the iteration those epochs ended at is not in the file (it "
                               "needs train lines of two or more whole epochs, whose last lines "
                               "are an epoch's iterations apart); left them out"))
        if self.misfit:
            out.append(Finding("warning", "eval-step-unknown",
                               f"{file}: {_count(self.misfit)} carry a step that is neither the "
                               "iteration reached nor the epoch in progress (as an iteration-"
                               "based run with LoggerHook's log_metric_by_epoch left True writes: "
                               "runner.epoch, always 0); left them out"))
        return out


def _count(lines: list[int]) -> str:
    shown = ", ".join(map(str, lines[:5])) + (", ..." if len(lines) > 5 else "")
    return f"{len(lines)} validation line{'s' if len(lines) > 1 else ''} (line {shown})"


def _place(records: list[tuple[int, dict[str, Any]]]) -> _Placed:
    """Each train line at its step, each validation line at the iteration it ran after."""
    placed = _Placed()
    legs = _legs(records)
    per_epoch = {leg: _iterations_an_epoch(records, legs, leg) for leg in set(legs.values())}
    last: tuple[int | None, int] | None = None  # (epoch, step) of the last train line
    for line, record in records:
        step = record.get("step")
        if not _whole(step):
            continue
        if _whole(record.get("iter")):
            epoch = record.get("epoch")
            last = (epoch if _whole(epoch) else None, step)
            values = numbers(record, _POSITION)
            if values:
                placed.rows.append((line, step, values))
            continue
        values = {f"{_VAL}{key}": value for key, value in numbers(record, {"step"}).items()}
        at = _val_step(step, last, per_epoch.get(legs.get(line, 0)))
        if at is None or not values:
            if values:
                epoch_numbered = last is not None and last[0] == step and step < last[1]
                (placed.unknown_epoch if epoch_numbered else placed.misfit).append(line)
            continue
        if last is not None and at != step:
            placed.by_epoch[legs[line]] = at // step
        placed.rows.append((line, at, values))
    return placed


def _val_step(step: int, last: tuple[int | None, int] | None, per_epoch: int | None
              ) -> int | None:
    """The iteration a validation line with ``step`` ran after; None when not known."""
    if last is None:
        return 0 if step == 0 else None
    epoch, reached = last
    if step >= reached:
        return step  # runner.iter (or an epoch-numbered line of a run of 1 iteration an epoch)
    if epoch is not None and step == epoch and per_epoch is not None:
        return step * per_epoch
    return None


def _legs(records: list[tuple[int, dict[str, Any]]]) -> dict[int, int]:
    """Line -> leg: a new leg where a train line's iteration is not past the last one's."""
    legs: dict[int, int] = {}
    leg, last = 0, None
    for line, record in records:
        iteration = record.get("iter")
        if _whole(iteration) and _whole(record.get("step")):
            if last is not None and iteration <= last:
                leg += 1
            last = iteration
        legs[line] = leg
    return legs


def _iterations_an_epoch(records: list[tuple[int, dict[str, Any]]], legs: dict[int, int],
                         leg: int) -> int | None:
    """The iterations an epoch of ``leg`` (N) when its train lines settle it; None otherwise.

    The logger writes at the same batch indices in every epoch (each ``interval``-th, and the
    last one unless ``ignore_last``), so the last train lines of whole epochs (ones a later
    epoch or their validation follows) are N apart, each in its own epoch: (E - 1) × N <
    last ≤ E × N. Two or more whole epochs with one such N settle it (69, 138, 207 give 69;
    50, 1057, 2064 of a 1,007-iteration epoch logged every 50 give 1,007).
    """
    ends: dict[int, int] = {}
    validated: set[int] = set()  # epochs an epoch-numbered validation line follows
    last: tuple[int, int] | None = None
    for line, record in records:
        epoch, iteration, step = record.get("epoch"), record.get("iter"), record.get("step")
        if legs.get(line) != leg or not _whole(step):
            continue
        if _whole(iteration):
            last = None
            if _whole(epoch) and epoch > 0:
                last = (epoch, iteration)
                ends[epoch] = max(ends.get(epoch, 0), iteration)
        elif last is not None and step == last[0] and step < last[1]:
            validated.add(step)
    whole = sorted(epoch for epoch in ends if epoch < max(ends, default=0) or epoch in validated)
    apart = {(ends[b] - ends[a]) / (b - a) for a, b in zip(whole, whole[1:])}
    if len(apart) != 1:
        return None
    per = apart.pop()
    if per != int(per) or per < 1:
        return None
    per = int(per)
    return per if all((epoch - 1) * per < ends[epoch] <= epoch * per for epoch in whole) else None


def _whole(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is a whole number of at least 0 (no bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


FORMAT = Format(
    "mmengine",
    "OpenMMLab (mmengine) run folders (or a work_dirs folder of them): vis_data/scalars.json "
    "({\"lr\": ..., \"loss\": ..., \"epoch\": 1, \"iter\": 69, \"step\": 69} a line) and "
    "config.py",
    read=read, files=files, sniff=lambda path: bool(expand(path)), expand=expand)
