"""The config dump mmengine writes beside a run's scalars (``<timestamp>/vis_data/config.py``,
``Config.dump``), read as data: a Python file of assignments whose values are literals and
``dict(...)`` calls. It is parsed with :mod:`ast` and never run; a value that is anything else
(a name, an expression, a lambda) is left out, so only what the file states plainly becomes a
fact.

Facts: ``train_dataloader.batch_size`` is the batch of one GPU (OpenMMLab's configs say so
beside it: ``base_batch_size = (10 GPUs) x (5 samples per GPU)`` for ``batch_size=5``, and a
config name's ``8xb32`` is 8 GPUs × 32); ``optim_wrapper.accumulative_counts`` is the gradient
accumulation (mmengine's ``OptimWrapper(optimizer, accumulative_counts=1, ...)`` steps on every
``accumulative_counts``-th ``update_params`` call, checked against its source), 1 when an
``OptimWrapper`` or ``AmpOptimWrapper`` config leaves it out; ``optim_wrapper.optimizer.lr``
and ``randomness.seed``. The world size is not in the config (``launcher`` names only how
processes start).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from ...model import Fact
from ..config import fact_value, hparams

__all__ = ["CONFIG", "config_facts", "literal_config"]

#: The config dump's name in ``vis_data/``.
CONFIG = "config.py"
#: Optimizer wrappers whose accumulation defaults to 1 (mmengine's OptimWrapper and its
#: mixed-precision subclass; another wrapper type may count differently).
_PLAIN_WRAPPERS = (None, "OptimWrapper", "AmpOptimWrapper")


class _Unparsed(Exception):
    """A value in the config that is not a literal."""


def literal_config(text: str) -> dict[str, Any]:
    """The top-level assignments of a config dump whose values are literals or ``dict()``
    calls (others are left out); {} for a file that is not Python.

    >>> literal_config("a = dict(b=1, c=[2, (3, )])\\nd = some_call()\\ne = -0.5")
    {'a': {'b': 1, 'c': [2, [3]]}, 'e': -0.5}
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    out: dict[str, Any] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            try:
                out[node.targets[0].id] = _value(node.value)
            except (_Unparsed, RecursionError):
                continue
    return out


def _value(node: ast.expr) -> Any:
    """The literal value of ``node``; :class:`_Unparsed` for anything else."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(item) for item in node.elts]
    if isinstance(node, ast.Dict) and all(key is not None for key in node.keys):
        return {_value(key): _value(item)  # type: ignore[arg-type]
                for key, item in zip(node.keys, node.values)}
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "dict" and not node.args
            and all(word.arg is not None for word in node.keywords)):
        return {word.arg: _value(word.value) for word in node.keywords}
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)
            and isinstance(node.operand.value, (int, float))):
        return -node.operand.value
    raise _Unparsed


def config_facts(file: Path) -> tuple[dict[str, Fact[Any]], dict[str, Fact[Any]]]:
    """The batch facts and every hyperparameter of the config dump ``file``."""
    try:
        config = literal_config(file.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return {}, {}
    where = f"{file.parent.name}/{file.name}"
    facts: dict[str, Fact[Any]] = {}
    wrapper = _section(config, "optim_wrapper")
    for name, keys in (("per_device_batch", ("train_dataloader", "batch_size")),
                       ("grad_accum", ("optim_wrapper", "accumulative_counts")),
                       ("learning_rate", ("optim_wrapper", "optimizer", "lr")),
                       ("seed", ("randomness", "seed"))):
        value = fact_value(name, _get(config, keys))
        if value is not None:
            facts[name] = Fact(value, f"{where}: {'.'.join(keys)}", "config")
    if ("grad_accum" not in facts and wrapper is not None
            and "accumulative_counts" not in wrapper and wrapper.get("type") in _PLAIN_WRAPPERS):
        facts["grad_accum"] = Fact(1, f"{where}: optim_wrapper sets no accumulative_counts "
                                      "(mmengine's OptimWrapper default: 1)", "config")
    return facts, hparams(config, where=where)


def _section(config: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = config.get(key)
    return value if isinstance(value, dict) else None


def _get(config: dict[str, Any], keys: tuple[str, ...]) -> Any:
    value: Any = config
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value
