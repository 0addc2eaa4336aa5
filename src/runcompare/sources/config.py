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
import math
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeGuard

from ..errors import InputError
from ..model import Fact, Finding

__all__ = ["CONFIG_KEYS", "FACT_FIELDS", "comparable", "config_facts", "config_hparams",
           "fact_value", "facts_from_config", "finite_number", "hparams", "load_yaml",
           "merge_hparams", "nested_facts", "read_config"]


def finite_number(value: Any) -> TypeGuard[float]:
    """Whether ``value`` is a real number (no bool) that a float holds finitely: a JSON
    integer of 400 digits is as little a count or a rate as an infinity.

    >>> finite_number(3), finite_number(2.5), finite_number(10 ** 400), finite_number(True)
    (True, True, False, False)
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


#: Fact name -> the configuration keys that supply it, most specific first.
CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "per_device_batch": ("per_device_batch", "per_device_train_batch_size", "micro_batch_size",
                         "train_micro_batch_size_per_gpu", "batch_size"),
    "grad_accum": ("grad_accum", "gradient_accumulation_steps", "accumulate_grad_batches"),
    "world_size": ("world_size",),
    "tensor_parallel": ("tensor_parallel", "tensor_model_parallel_size", "tensor_parallel_size",
                        "tp_size"),
    "pipeline_parallel": ("pipeline_parallel", "pipeline_model_parallel_size",
                          "pipeline_parallel_size", "pp_size"),
    "context_parallel": ("context_parallel", "context_parallel_size", "cp_size"),
    "seq_len": ("seq_len", "seq_length", "sequence_len", "sequence_length", "block_size",
                "max_seq_length"),
    "global_batch": ("global_batch", "global_batch_size"),
    "tokens_per_step": ("tokens_per_step", "tokens_per_iter"),
    "max_steps": ("max_steps", "train_iters"),
    "logging_steps": ("logging_steps", "log_interval"),
    "eval_steps": ("eval_steps", "eval_interval"),
    "learning_rate": ("learning_rate", "lr"),
    "num_train_epochs": ("num_train_epochs", "num_epochs", "max_epochs"),
    "seed": ("seed",),
    "transformers_version": ("transformers_version",),
    "include_num_input_tokens_seen": ("include_num_input_tokens_seen",),
    "flops_per_token": ("flops_per_token",),
    "save_steps": ("save_steps", "save_interval"),
    "max_grad_norm": ("max_grad_norm", "gradient_clipping", "clip_grad"),
    "lr_scheduler_type": ("lr_scheduler_type",),
    "warmup_steps": ("warmup_steps",),
    "weight_decay": ("weight_decay",),
}

#: Facts that hold whole numbers of at least 1 (a 0, -1 or ratio means "not set" in the writers).
_COUNTS = {"per_device_batch", "grad_accum", "world_size", "tensor_parallel", "pipeline_parallel",
           "context_parallel", "seq_len", "global_batch", "tokens_per_step", "max_steps",
           "logging_steps", "eval_steps", "save_steps", "tokens_seen"}

#: Facts that are whole numbers of any sign.
_INTEGERS = {"seed"}

#: Facts that are positive numbers, not necessarily whole (training FLOPs per token, total).
_POSITIVE = {"flops_per_token", "total_flos"}

#: Facts kept as text (a version, a mode such as "all" / "non_padding" / True).
_TEXT = {"transformers_version", "include_num_input_tokens_seen", "lr_scheduler_type"}

#: Facts that are names, not numbers.
_NAMES = {"step_metric", "name"}

#: Every fact name that ``--set`` and ``runcompare.toml`` accept.
FACT_FIELDS = (*CONFIG_KEYS, *sorted(_NAMES))


def facts_from_config(config: Mapping[str, Any], *, where: str,
                      kind: str = "config") -> dict[str, Fact[Any]]:
    """Facts named by the keys of ``config``; each fact's source is ``"<where>: <key>"``.

    >>> facts_from_config({"per_device_train_batch_size": 8, "max_steps": -1}, where="args")
    {'per_device_batch': Fact(value=8, source='args: per_device_train_batch_size', kind='config')}
    """
    facts: dict[str, Fact[Any]] = {}
    for name, keys in CONFIG_KEYS.items():
        for key in keys:
            value = fact_value(name, config.get(key))
            if value is not None:
                facts[name] = Fact(value, f"{where}: {key}", kind)  # type: ignore[arg-type]
                break
    return facts


def fact_value(name: str, value: Any) -> Any:
    """The value as the fact ``name`` holds it, or None when the writer's value means "not
    set" or is none a fact can be (a batch size of 0.5, ``Infinity``, ``true``)."""
    if name in _TEXT:
        return None if value is None or value == "" else str(value)
    if name in _INTEGERS:
        number = fact_value("learning_rate", value)
        return int(number) if number is not None and float(number).is_integer() else None
    if value is None or isinstance(value, bool):
        return None
    if name in _COUNTS:
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return value if isinstance(value, int) and value >= 1 else None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    number = float(value) if isinstance(value, (int, float)) else None
    if name in _POSITIVE and (number is None or not number > 0 or number == float("inf")):
        return None
    return number


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


def comparable(value: Any) -> Any:
    """A hyperparameter's value as compared across sources and runs: numbers as floats, the
    text of a number or of true/false as that number or bool (MLflow keeps every param as
    text), other text as it is.

    >>> comparable("1e-3") == comparable(0.001), comparable("True"), comparable(8)
    (True, True, 8.0)
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return float(text)
    except ValueError:
        return text


def merge_hparams(*groups: Mapping[str, Fact[Any]],
                  run: str | None = None) -> tuple[dict[str, Fact[Any]], list[Finding]]:
    """One fact per key, the earlier group winning; keys on which a later group disagrees are
    named in one ``hparam-conflict`` warning (none when they all agree)."""
    merged: dict[str, Fact[Any]] = {}
    clashes: list[str] = []
    for group in groups:
        for key, fact in group.items():
            held = merged.setdefault(key, fact)
            if held is not fact and comparable(held.value) != comparable(fact.value):
                clashes.append(f"{key} {held.value} ({held.source}) but {fact.value} "
                               f"({fact.source})")
    if not clashes:
        return merged, []
    shown = "; ".join(clashes[:3]) + (f"; and {len(clashes) - 3} more" if len(clashes) > 3
                                      else "")
    return merged, [Finding("warning", "hparam-conflict",
                            f"the sources disagree on {len(clashes)} hyperparameter(s): {shown}; "
                            "each is shown as the first source gives it", run)]


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
    if not file.is_file():
        raise InputError(f"{file}: no such config file")
    config = load_yaml(file)
    return hparams(config, where=file.name) if isinstance(config, Mapping) else {}


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
