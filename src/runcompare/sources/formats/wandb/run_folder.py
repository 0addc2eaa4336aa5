"""W&B run folders (wandb/run-<date>-<id>/, wandb/offline-run-<date>-<id>/), read offline.

The ``.wandb`` file is decoded natively (no wandb package, no network): LevelDB-log framing in
``codecs.leveldb``, protobuf fields in ``_proto``, history in bulk in ``_history``.
A run resumed into the same id writes one folder per leg; :func:`read` numbers them in time
order and keeps every point of every leg (``legs.resolve_legs`` drops the orphaned ones).

The step: the step metric the run declared (``wandb.define_metric("*", step_metric=...)``,
e.g. the HF Trainer's ``train/global_step``) counts optimizer steps. Without one, W&B's own
``_step`` counts ``wandb.log()`` calls, which is said in a ``step-is-log-call`` warning.
``_timestamp`` gives the wall time; keys starting with ``_`` are W&B's own, not metrics.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from ....errors import InputError
from ....facts import facts_from_config, finite_number
from ....model import Fact, Finding, RawLog
from ...codecs.files import files_in, folders_in, is_dir, is_file, resolved
from ...config import hparams, nested_facts
from ...format import Format
from ._leg import RUN_DIR, SIDE_FILES, Leg, decode_leg, wandb_file
from ._steps import LOG_STEP, history_scalars

__all__ = ["FORMAT", "expand", "files", "output_lines", "read", "run_folders", "sniff"]

#: Summary keys that are facts: the HF Trainer's end-of-training values (W&B keeps them in
#: the summary, not the history) and counters.
_SUMMARY_FACTS = {"train_samples_per_second": "train_samples_per_second",
                  "train_steps_per_second": "train_steps_per_second",
                  "total_flos": "total_flos",
                  # transformers < 4.36 logged them under train/ (its W&B names)
                  "train/train_samples_per_second": "train_samples_per_second",
                  "train/train_steps_per_second": "train_steps_per_second",
                  "train/total_flos": "total_flos"}


def sniff(path: Path) -> bool:
    return bool(run_folders(path))


def files(path: Path) -> list[Path]:
    """The ``.wandb`` files and side files of every leg of the run at ``path``."""
    found: list[Path] = []
    for folder in run_folders(path):
        file = folder if is_file(folder) else wandb_file(folder)
        found += [file] if file is not None else []
        if is_dir(folder):
            found += [folder / name for name in SIDE_FILES if is_file(folder / name)]
    return found


def expand(path: Path) -> list[Path]:
    """One root per W&B run under ``path`` (folders of one run id, a resume, count once).

    A run folder or ``.wandb`` file is one run. A ``wandb/`` folder (or a folder holding one)
    with several run ids gives each id's earliest folder; :func:`read` of that folder gathers
    the id's later folders as further legs.
    """
    if is_file(path) or _is_run_folder(path):
        return [path]
    groups: dict[str, list[Path]] = {}
    for folder in run_folders(path):
        groups.setdefault(_run_id(folder), []).append(folder)
    if len(groups) < 2:
        return [path]
    return [folders[0] for folders in groups.values()]


def run_folders(path: Path) -> list[Path]:
    """The run folders (legs) that make up the run at ``path``, oldest first.

    ``path`` may be a ``.wandb`` file (itself), a run folder (it and its siblings with the
    same run id), a ``wandb/`` folder or a folder holding ``wandb/`` (every run folder there;
    the ``latest-run`` link is not counted twice).
    """
    if is_file(path):
        return [path] if path.suffix == ".wandb" else []
    if not is_dir(path):
        return []
    if _is_run_folder(path):
        real = resolved(path)
        siblings = [f for f in _run_folders_in(real.parent) if _run_id(f) == _run_id(real)]
        return siblings or [real]
    for folder in (path, path / "wandb"):
        found = _run_folders_in(folder) if is_dir(folder) else []
        if found:
            return found
    return []


def _run_folders_in(folder: Path) -> list[Path]:
    seen: dict[Path, Path] = {}
    for child in folders_in(folder):
        if RUN_DIR.match(child.name):
            seen.setdefault(resolved(child), child)
    return sorted(seen.values(), key=lambda f: (f.name.split("run-", 1)[1], f.name))


def _is_run_folder(path: Path) -> bool:
    return is_dir(path) and (RUN_DIR.match(_real_name(path)) is not None
                             or (wandb_file(path) is not None and not any(
                                 file.suffix == ".wandb" for folder in folders_in(path)
                                 for file in files_in(folder))))


def _real_name(path: Path) -> str:
    """The name of what ``path`` leads to (``latest-run``: the run folder it links to);
    resolved only where it can differ from ``path``'s own name (a link, or ``..``)."""
    if path.name in ("", ".", "..") or os.path.islink(path):
        return resolved(path).name
    return path.name


def _run_id(folder: Path) -> str:
    match = RUN_DIR.match(_real_name(folder))
    return match.group(2) if match else folder.name


def read(path: Path, *, hints: Mapping[str, object] | None = None) -> RawLog:
    """Every point of every leg of the W&B run at ``path``, its facts and findings.

    ``hints["step_metric"]`` (a user's ``--set step_metric=NAME``) overrides the step metric
    the run declared (``"_step"`` forces W&B's log-call counter).
    """
    step_metric = (hints or {}).get("step_metric")
    folders = run_folders(path)
    if not folders:
        raise InputError(f"{path}: no W&B run found (expected wandb/run-<date>-<id>/ or "
                         "wandb/offline-run-<date>-<id>/ holding a .wandb file)")
    legs = sorted((decode_leg(f) for f in folders), key=lambda leg: leg.start_time or 0.0)
    findings = [f for leg in legs for f in leg.findings]
    readable = [leg for leg in legs if not any(f.level == "error" for f in leg.findings)]
    if not readable:
        raise InputError(findings[0].message if findings else f"{path}: no readable W&B run")
    findings += _runs_merged(path, readable)
    scalars, unit, step_findings, chosen = history_scalars(
        readable, None if step_metric is None else str(step_metric), path)
    if scalars.is_empty():
        step_findings.append(Finding("warning", "no-history",
                                     f"{path}: the W&B run holds no logged history (wandb.log "
                                     "was never called, or the run stopped before its first "
                                     "log): no point to compare"))
    return RawLog(path=path, scalars=scalars, step_unit=unit,
                  facts=_facts(readable, scalars, chosen),
                  findings=findings + step_findings, files=files(path),
                  aliases={}, name=_display_name(readable), hparams=_hparams(readable))


def output_lines(path: Path) -> list[str]:
    """The console output the run(s) at ``path`` printed (``output_raw`` records, else
    ``files/output.log``), leg after leg, split at newlines; carriage returns are kept."""
    lines: list[str] = []
    for folder in run_folders(path):
        leg = decode_leg(folder, output=True)
        log = leg.folder / "files" / "output.log"
        if leg.output:
            lines += leg.output
        elif is_file(log):
            lines += log.read_text(encoding="utf-8", errors="replace").split("\n")
    return lines


def _display_name(legs: list[Leg]) -> str | None:
    names = [leg.run.get("display_name") for leg in legs if leg.run.get("display_name")]
    return names[-1] if names else None


def _runs_merged(path: Path, legs: list[Leg]) -> list[Finding]:
    """Say so when ``path`` holds several run ids that are read as legs of one run."""
    ids = list(dict.fromkeys(leg.run_id for leg in legs))
    if len(ids) < 2:
        return []
    dirs = {str(leg.config.get("output_dir")) for leg in legs}
    same_output = len(dirs) == 1 and "None" not in dirs
    why = (f"restarts of one Trainer output_dir {dirs.pop()!r}" if same_output
           else "separate runs")
    return [Finding("info" if same_output else "warning", "runs-merged",
                    f"{path}: {len(ids)} W&B runs ({', '.join(ids)}) read as consecutive legs "
                    f"of one run, in start order (they look like {why}); pass one run folder "
                    "to read a single run")]


def _facts(legs: list[Leg], scalars: pl.DataFrame, step: str) -> dict[str, Fact[Any]]:
    """Config, summary, metadata and run-record facts; later legs and sources win ties."""
    facts: dict[str, Fact[Any]] = {}
    yaml_config = {k: v for leg in legs for k, v in leg.config_yaml.items() if k != "_wandb"}
    config = {k: v for leg in legs for k, v in leg.config.items() if k != "_wandb"}
    for where, values in (("wandb config.yaml", yaml_config), ("wandb config", config)):
        facts.update(nested_facts(values, where=where))
        facts.update(facts_from_config(values, where=where, kind="config"))
    summary = {k: v for leg in legs for k, v in leg.summary.items()}
    last = scalars.group_by("metric").agg(pl.col("value").last())  # the history's, if not there
    logged = dict(last.filter(pl.col("metric").is_in(list(_SUMMARY_FACTS))).iter_rows())
    for key, name in _SUMMARY_FACTS.items():
        value = summary.get(key, logged.get(key))
        if finite_number(value) and value > 0:
            where = "wandb summary" if key in summary else "wandb history: last"
            facts[name] = Fact(value, f"{where}: {key}", "logged")
    tokens = scalars.filter(pl.col("metric") == "train/num_input_tokens_seen")["value"].max()
    if isinstance(tokens, float) and math.isfinite(tokens) and tokens > 0:
        facts["tokens_seen"] = Fact(int(tokens), "wandb history: last "
                                    "train/num_input_tokens_seen", "logged")
    if step != LOG_STEP and not scalars.is_empty():
        facts["global_step"] = Fact(int(scalars.get_column("step").max()),  # type: ignore[arg-type]
                                    f"wandb history: last {step}", "logged")
    if "world_size" not in facts:
        facts.update(_gpu_hint(legs))
    start = next((leg.start_time for leg in legs if leg.start_time), None)
    if start is not None:
        facts["start_time"] = Fact(start, "wandb run record: start_time", "logged")
    return facts


def _hparams(legs: list[Leg]) -> dict[str, Fact[Any]]:
    """Every key of the run config (later legs win), then of ``files/config.yaml`` where the
    config record lacks it; W&B's own ``_wandb`` entry left out."""
    found: dict[str, Fact[Any]] = {}
    for where, attr in (("wandb config.yaml", "config_yaml"), ("wandb config", "config")):
        merged = {k: v for leg in legs for k, v in getattr(leg, attr).items() if k != "_wandb"}
        found.update(hparams(merged, where=where))
    return found


def _gpu_hint(legs: list[Leg]) -> dict[str, Fact[Any]]:
    """GPUs on the machine as a world-size hint (not the world size: one process may use
    them all, or several hosts may train together)."""
    for leg in reversed(legs):
        for where, count in (("wandb environment record", leg.environment.get("gpu_count")),
                             ("wandb-metadata.json", leg.metadata.get("gpu_count"))):
            if isinstance(count, int) and not isinstance(count, bool) and count >= 1:
                return {"world_size": Fact(count, f"{where}: gpu_count (a hint: GPUs on the "
                                                  "first host, not necessarily the world size)",
                                           "hint")}
    return {}


FORMAT = Format(
    "wandb",
    "W&B run folders (wandb/run-*/ or offline-run-*/ with a .wandb file), read offline",
    read=read, files=files, sniff=sniff, expand=expand)
