"""Facts from configuration mappings: TrainingArguments, W&B config, hparams, sidecars.

Every source that finds a configuration dict (HF's ``args/text_summary``, a W&B config, a
Lightning ``hparams.yaml``, MLflow params, an Axolotl YAML, ``runcompare.toml``) turns it into
facts here, so one key means one thing across formats.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .model import Fact

__all__ = ["CONFIG_KEYS", "FACT_FIELDS", "facts_from_config"]

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
}

#: Facts that hold whole numbers of at least 1 (a 0, -1 or ratio means "not set" in the writers).
_COUNTS = {"per_device_batch", "grad_accum", "world_size", "tensor_parallel", "pipeline_parallel",
           "context_parallel", "seq_len", "global_batch", "tokens_per_step", "max_steps",
           "logging_steps", "eval_steps"}

#: Facts that are whole numbers of any sign.
_INTEGERS = {"seed"}

#: Facts that are positive numbers, not necessarily whole (training FLOPs per token).
_POSITIVE = {"flops_per_token"}

#: Facts kept as text (a version, a mode such as "all" / "non_padding" / True).
_TEXT = {"transformers_version", "include_num_input_tokens_seen"}

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
            value = _clean(name, config.get(key))
            if value is not None:
                facts[name] = Fact(value, f"{where}: {key}", kind)  # type: ignore[arg-type]
                break
    return facts


def _clean(name: str, value: Any) -> Any:
    """The value as a fact holds it, or None when the writer's value means "not set"."""
    if name in _TEXT:
        return None if value is None or value == "" else str(value)
    if name in _INTEGERS:
        number = _clean("learning_rate", value)
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
