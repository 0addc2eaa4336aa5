"""Facts from configuration mappings: TrainingArguments, W&B config, hparams, sidecars.

Every source that finds a configuration dict (HF's ``args/text_summary``, a W&B config, a
Lightning ``hparams.yaml``, MLflow params, an Axolotl YAML, ``runcompare.toml``) turns it into
facts here, so one key means one thing across formats: :func:`facts_from_config` for flat
keys, :func:`nested_facts` for nested ones, :func:`load_yaml` for YAML files (never builds
Python objects) and :func:`read_config` for a YAML training config (``--config FILE``, an
Axolotl config beside the logs), Axolotl's meanings included: ``micro_batch_size`` is the
per-device micro-batch; ``batch_size`` (when given) is micro-batch × accumulation per device,
so it never becomes ``per_device_batch`` there, and without ``gradient_accumulation_steps``
the accumulation is ``batch_size // micro_batch_size`` as Axolotl derives it; with
``sample_packing`` a "sequence" of ``sequence_len`` tokens holds several packed samples,
which an info finding says.

:func:`hparams` keeps every key of such a mapping (not only those that name a fact) as a
fact with its source: the run's hyperparameters, which ``inspect`` lists and ``compare``
sets side by side ("what differs").
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..facts import facts_from_config
from ..model import Fact, Finding
from .codecs.files import is_file

__all__ = ["config_facts", "config_hparams", "hparams", "load_yaml", "nested_facts",
           "read_config"]


def hparams(config: Mapping[str, Any], *, where: str) -> dict[str, Fact[Any]]:
    """Every key of ``config`` as a fact of kind ``config`` whose source is
    ``"<where>: <key>"``: nested keys joined with ``.``, a list or other non-scalar value kept
    as its JSON text (a date as its text), a value of None (not set) left out.

    >>> found = hparams({"learning_rate": 3e-3, "report_to": ["wandb"], "model": {"dim": 64},
    ...                  "warmup_ratio": None}, where="args")
    >>> {key: fact.value for key, fact in found.items()}
    {'learning_rate': 0.003, 'report_to': '["wandb"]', 'model.dim': 64}
    >>> found["model.dim"].source
    'args: model.dim'
    """
    out: dict[str, Fact[Any]] = {}
    for _, _, key, value in _leaves(config, 0, ""):
        if value is None:
            continue
        if isinstance(value, (list, tuple, set)):
            value = json.dumps(list(value), default=str, ensure_ascii=False)
        elif not isinstance(value, (str, int, float, bool)):
            value = str(value)  # a YAML date, a tag's text
        out[key] = Fact(value, f"{where}: {key}", "config")
    return out


def nested_facts(config: Mapping[str, Any], *, where: str,
                 kind: str = "config") -> dict[str, Fact[Any]]:
    """:func:`facts_from_config` over a nested config or one with path keys.

    A key is matched by its last component (``data.batch_size``, ``model/lr``, or
    ``batch_size`` under ``data:``); shallower keys win. A name found twice at its shallowest
    depth with different values (``model.dropout`` and ``data.dropout``) says nothing. The
    source names the whole path.

    >>> nested_facts({"trainer": {"accumulate_grad_batches": 4}, "data/batch_size": "8"},
    ...              where="hparams.yaml")["grad_accum"].source
    'hparams.yaml: trainer.accumulate_grad_batches'
    """
    leaves: dict[str, tuple[int, str, Any]] = {}
    ambiguous: set[str] = set()
    for depth, leaf, shown, value in sorted(_leaves(config, 0, ""), key=lambda item: item[0]):
        first = leaves.setdefault(leaf, (depth, shown, value))
        if first[0] == depth and first[2] != value:
            ambiguous.add(leaf)
    leaves = {leaf: found for leaf, found in leaves.items() if leaf not in ambiguous}
    facts = facts_from_config({leaf: value for leaf, (_, _, value) in leaves.items()},
                              where=where, kind=kind)
    return {name: Fact(fact.value, f"{where}: {leaves[fact.source.rsplit(': ', 1)[1]][1]}",
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


@lru_cache(maxsize=1)
def _loader() -> type[Any]:
    """A SafeLoader that reads unknown tags (``!!python/object:...`` that Lightning's
    hparams.yaml may hold) as the plain mapping, list or string under the tag instead of
    failing. Made on first use: yaml is imported only when a YAML file is read."""
    import yaml

    def untagged(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Any:
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    class Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types: Any here
        pass

    Loader.add_multi_constructor("", untagged)
    return Loader


def load_yaml(file: Path) -> Any:
    """The parsed YAML of ``file``; raises :class:`InputError` naming the file and line."""
    try:
        text = file.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"{file}: cannot be read ({exc.strerror})") from exc
    import yaml

    try:
        return yaml.load(text, Loader=_loader())  # a SafeLoader: never builds Python objects
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{file}: not valid YAML{where} ({problem}); fix the file or pass "
                         "the values with --set") from exc


#: Axolotl keys whose fact name differs from CONFIG_KEYS.
_AXOLOTL_KEYS = {"num_epochs": "num_train_epochs"}


def config_facts(file: Path) -> dict[str, Fact[Any]]:
    """Facts of kind ``config`` from a YAML config (``--config FILE``), Axolotl's keys included.

    Raises :class:`InputError` when the file is missing, not YAML or not a mapping.
    """
    return read_config(file)[0]


def config_hparams(file: Path) -> dict[str, Fact[Any]]:
    """Every key of a YAML config (``--config FILE``, an Axolotl config) as :func:`hparams`;
    raises :class:`InputError` like :func:`read_config`."""
    if not is_file(file):
        raise InputError(f"{file}: no such config file")
    config = load_yaml(file)
    return hparams(config, where=file.name) if isinstance(config, Mapping) else {}


def read_config(file: Path) -> tuple[dict[str, Fact[Any]], list[Finding]]:
    """Facts and findings of one YAML config; see :func:`config_facts`."""
    if not is_file(file):
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
