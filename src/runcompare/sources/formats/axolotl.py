"""Axolotl YAML config beside the logs (micro_batch_size, gradient_accumulation_steps, ...).

A facts-only source: :func:`read` returns no points, only facts of kind ``config``, each with
its source (``"axolotl.yml: micro_batch_size"``). It claims a ``*.yml``/``*.yaml`` in the run
folder that has ``micro_batch_size`` and one of ``base_model``, ``sequence_len``,
``gradient_accumulation_steps``, ``datasets`` (Axolotl's required and usual keys).

Axolotl's meanings: ``micro_batch_size`` is the per-device micro-batch; ``batch_size`` (when
given) is micro-batch × accumulation per device, so it never becomes ``per_device_batch``
here, and without ``gradient_accumulation_steps`` the accumulation is
``batch_size // micro_batch_size`` as Axolotl derives it. ``num_epochs`` is the number of
epochs. With ``sample_packing`` a "sequence" of ``sequence_len`` tokens holds several packed
samples, which an info finding says. The reading of the YAML into facts is
:func:`~runcompare.sources.config.read_config`, which ``--config FILE`` uses too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import polars as pl

from ...errors import InputError
from ...model import RAW_SCHEMA, Finding, RawLog
from ..codecs.files import files_in, is_dir, is_file
from ..config import config_hparams, load_yaml, read_config
from ..format import Format

__all__ = ["FORMAT", "files", "read"]

_SUFFIXES = (".yml", ".yaml")
#: YAML files other tools write into run folders, never an Axolotl config.
_NOT_AXOLOTL = {"hparams.yaml", "meta.yaml", "config.yaml"}
_MAX_BYTES = 1 << 20
_SIGNATURE = ("base_model", "sequence_len", "gradient_accumulation_steps", "datasets")
_HAS_MICRO = re.compile(rb"^micro_batch_size\s*:", re.MULTILINE)


def files(path: Path) -> list[Path]:
    """The Axolotl configs at ``path`` (a config file, or a run folder's top-level YAMLs)."""
    if is_file(path):
        return [path] if _is_axolotl(path) else []
    if not is_dir(path):
        return []
    candidates = [p for p in files_in(path) if p.suffix in _SUFFIXES]
    return [p for p in candidates if p.name not in _NOT_AXOLOTL and _is_axolotl(p)]


def _is_axolotl(file: Path) -> bool:
    """Cheap test first (a top-level ``micro_batch_size:`` line), then the parsed keys."""
    try:
        if file.suffix not in _SUFFIXES or not is_file(file) or file.stat().st_size > _MAX_BYTES:
            return False
        if not _HAS_MICRO.search(file.read_bytes()):
            return False
        config = load_yaml(file)
    except (OSError, InputError):
        return False
    return isinstance(config, Mapping) and any(key in config for key in _SIGNATURE)


def read(path: Path, *, hints: Mapping[str, object] | None = None) -> RawLog:
    """Facts (no points) from the Axolotl config at ``path``; ``hints`` are not needed."""
    found = files(path)
    if not found:
        raise InputError(f"{path}: no Axolotl config found (a .yml/.yaml with micro_batch_size "
                         "and base_model or sequence_len); pass it with --config FILE")
    facts, findings = read_config(found[0])
    if len(found) > 1:
        findings.append(Finding("warning", "several-configs",
                                f"{path}: {len(found)} Axolotl configs "
                                f"({', '.join(f.name for f in found)}); "
                                f"facts come from {found[0].name}; pass the right one with "
                                "--config FILE"))
    empty = pl.DataFrame(schema=RAW_SCHEMA)
    return RawLog(path=path, scalars=empty, step_unit="optimizer", facts=facts,
                  findings=findings, files=found, hparams=config_hparams(found[0]))


FORMAT = Format(
    "axolotl", "an Axolotl YAML config (micro_batch_size and base_model, sequence_len, ...) in "
    "the run folder: batch facts only", read=read, files=files, facts_only=True)


