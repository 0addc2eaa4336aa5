"""The facts runcompare knows, shared by every layer: their names (:data:`FACT_FIELDS`, what
``--set`` and ``runcompare.toml`` accept), the configuration keys that give each
(:data:`CONFIG_KEYS`, so one key means one thing across formats), a configuration mapping's
facts (:func:`facts_from_config`), and how hyperparameters are compared across sources and
runs (:func:`comparable`, :func:`merge_hparams`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeGuard

from .model import Fact, Finding

__all__ = ["CONFIG_KEYS", "FACT_FIELDS", "comparable", "fact_value", "facts_from_config",
           "finite_number", "merge_hparams"]


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
