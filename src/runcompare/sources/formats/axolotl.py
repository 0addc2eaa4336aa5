"""Axolotl YAML config beside the logs (micro_batch_size, gradient_accumulation_steps, ...).

A facts-only source: :func:`read` returns no points, only facts of kind ``config``, each with
its source (``"axolotl.yml: micro_batch_size"``). It claims a ``*.yml``/``*.yaml`` in the run
folder that has ``micro_batch_size`` and one of ``base_model``, ``sequence_len``,
``gradient_accumulation_steps``, ``datasets`` (Axolotl's required and usual keys).
:func:`config_facts` reads any YAML config named with ``--config FILE``.

Axolotl's meanings: ``micro_batch_size`` is the per-device micro-batch; ``batch_size`` (when
given) is micro-batch × accumulation per device, so it never becomes ``per_device_batch``
here, and without ``gradient_accumulation_steps`` the accumulation is
``batch_size // micro_batch_size`` as Axolotl derives it. ``num_epochs`` is the number of
epochs. With ``sample_packing`` a "sequence" of ``sequence_len`` tokens holds several packed
samples, which an info finding says.

The YAML helpers here (:func:`load_yaml`, :func:`nested_facts`) are shared by the Lightning
(hparams.yaml) and MLflow (params) sources.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from ...errors import InputError
from ...model import RAW_SCHEMA, Fact, Finding, RawLog
from ..config import facts_from_config

__all__ = ["FACTS_ONLY", "config_facts", "expand", "files", "load_yaml", "nested_facts", "read",
           "read_config"]

#: Load.py: this source supplies facts, never points; it must not be chosen for scalars.
FACTS_ONLY = True

_SUFFIXES = (".yml", ".yaml")
#: YAML files other tools write into run folders, never an Axolotl config.
_NOT_AXOLOTL = {"hparams.yaml", "meta.yaml", "config.yaml"}
_MAX_BYTES = 1 << 20
_SIGNATURE = ("base_model", "sequence_len", "gradient_accumulation_steps", "datasets")
_HAS_MICRO = re.compile(rb"^micro_batch_size\s*:", re.MULTILINE)
#: Axolotl keys whose fact name differs from facts.CONFIG_KEYS.
_AXOLOTL_KEYS = {"num_epochs": "num_train_epochs"}


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads unknown tags (``!!python/object:...`` that Lightning's hparams.yaml
    may hold) as the plain mapping, list or string under the tag instead of failing."""


def _untagged(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_Loader.add_multi_constructor("", _untagged)


def load_yaml(file: Path) -> Any:
    """The parsed YAML of ``file``; raises :class:`InputError` naming the file and line."""
    try:
        text = file.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"{file}: cannot be read ({exc.strerror})") from exc
    try:
        return yaml.load(text, Loader=_Loader)  # a SafeLoader: never builds Python objects
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{file}: not valid YAML{where} ({problem}); fix the file or pass "
                         "the values with --set") from exc


def nested_facts(config: Mapping[str, Any], *, where: str,
                 kind: str = "config") -> dict[str, Fact[Any]]:
    """:func:`~runcompare.sources.config.facts_from_config` over a nested config or one with path keys.

    A key is matched by its last component (``data.batch_size``, ``model/lr``, or
    ``batch_size`` under ``data:``); shallower keys win, then earlier ones. The source names
    the whole path.

    >>> nested_facts({"trainer": {"accumulate_grad_batches": 4}, "data/batch_size": "8"},
    ...              where="hparams.yaml")["grad_accum"].source
    'hparams.yaml: trainer.accumulate_grad_batches'
    """
    leaves: dict[str, tuple[str, Any]] = {}
    for _, leaf, shown, value in sorted(_leaves(config, 0, ""), key=lambda item: item[0]):
        leaves.setdefault(leaf, (shown, value))
    facts = facts_from_config({leaf: value for leaf, (_, value) in leaves.items()},
                              where=where, kind=kind)
    return {name: Fact(fact.value, f"{where}: {leaves[fact.source.rsplit(': ', 1)[1]][0]}",
                       fact.kind)
            for name, fact in facts.items()}


def _leaves(config: Mapping[str, Any], depth: int,
            prefix: str) -> list[tuple[int, str, str, Any]]:
    """(depth, last key component, key path as shown, value) of every non-mapping value.

    ``a/b`` and ``a.b`` keys count as two levels, like ``b`` under ``a:``.
    """
    out: list[tuple[int, str, str, Any]] = []
    for key in config:
        parts = [p for p in re.split(r"[/.]", str(key)) if p]
        if not parts:
            continue
        shown = f"{prefix}{key}"
        value = config[key]
        if isinstance(value, Mapping):
            out += _leaves(value, depth + len(parts), f"{shown}.")
        else:
            out.append((depth + len(parts), parts[-1], shown, value))
    return out


def expand(path: Path) -> list[Path]:
    """A facts-only source never splits a path into runs: ``[path]``."""
    return [path]


def files(path: Path) -> list[Path]:
    """The Axolotl configs at ``path`` (a config file, or a run folder's top-level YAMLs)."""
    if path.is_file():
        return [path] if _is_axolotl(path) else []
    if not path.is_dir():
        return []
    candidates = sorted(p for p in path.iterdir() if p.suffix in _SUFFIXES)
    return [p for p in candidates if p.name not in _NOT_AXOLOTL and _is_axolotl(p)]


def _is_axolotl(file: Path) -> bool:
    """Cheap test first (a top-level ``micro_batch_size:`` line), then the parsed keys."""
    try:
        if file.suffix not in _SUFFIXES or file.stat().st_size > _MAX_BYTES:
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
    return RawLog(source="axolotl", path=path, scalars=empty, step_unit="optimizer",
                  facts=facts, findings=findings, files=found)


def config_facts(file: Path) -> dict[str, Fact[Any]]:
    """Facts of kind ``config`` from a YAML config (``--config FILE``), Axolotl's keys included.

    Raises :class:`InputError` when the file is missing, not YAML or not a mapping.
    """
    return read_config(file)[0]


def read_config(file: Path) -> tuple[dict[str, Fact[Any]], list[Finding]]:
    """Facts and findings of one YAML config; see :func:`config_facts`."""
    if not file.is_file():
        raise InputError(f"{file}: no such config file")
    config = load_yaml(file)
    if not isinstance(config, Mapping):
        raise InputError(f"{file}: not a YAML mapping of keys to values (an Axolotl config "
                         "has e.g. `micro_batch_size: 2`)")
    where = file.name
    axolotl = "micro_batch_size" in config
    plain = {k: v for k, v in config.items() if not (axolotl and k == "batch_size")}
    facts = nested_facts(plain, where=where)
    for key, name in _AXOLOTL_KEYS.items():
        extra = facts_from_config({name: config.get(key)}, where=where)
        if name in extra and name not in facts:
            facts[name] = Fact(extra[name].value, f"{where}: {key}", "config")
    if axolotl and "grad_accum" not in facts:
        facts.update(_derived_accum(config, where))
    findings = []
    if axolotl and config.get("sample_packing") is True:
        findings.append(Finding(
            "info", "sample-packing",
            f"{where}: sample_packing is on: each of the micro_batch_size sequences packs "
            f"several samples into sequence_len tokens, so the samples axis counts packed "
            "sequences and tokens count padding up to sequence_len"))
    return facts, findings


def _derived_accum(config: Mapping[str, Any], where: str) -> dict[str, Fact[Any]]:
    """Axolotl's own rule: gradient_accumulation_steps = batch_size // micro_batch_size."""
    total, micro = config.get("batch_size"), config.get("micro_batch_size")
    if not (isinstance(total, int) and isinstance(micro, int) and micro > 0
            and total >= micro and not isinstance(total, bool)):
        return {}
    return {"grad_accum": Fact(total // micro, f"{where}: batch_size ÷ micro_batch_size",
                               "config")}
