"""The config dump mmengine writes beside a run's scalars (``<timestamp>/vis_data/config.py``,
``Config.dump``), read as data: a Python file of assignments whose values are literals and
``dict(...)`` calls. It is parsed with :mod:`ast` and never run; a value that is anything else
(a name, an expression, a lambda) is no fact and no hyperparameter, so only what the file states
plainly becomes one (and a key set to code is not taken for a key left out).

Facts: ``train_dataloader.batch_size`` is the batch of one GPU (OpenMMLab's configs say so
beside it: ``base_batch_size = (10 GPUs) x (5 samples per GPU)`` for ``batch_size=5``, and a
config name's ``8xb32`` is 8 GPUs × 32); ``optim_wrapper.accumulative_counts`` is the gradient
accumulation (mmengine's ``OptimWrapper(optimizer, accumulative_counts=1, ...)`` steps on every
``accumulative_counts``-th ``update_params`` call, checked against its source), 1 when an
``OptimWrapper`` or ``AmpOptimWrapper`` config leaves it out; ``optim_wrapper.optimizer.lr``
and ``randomness.seed``. ``launcher = 'none'`` is a run of one process on one device (the
Runner sets ``_distributed = False`` for it and wraps no model for data parallelism): world
size 1; any other launcher starts processes the config does not count.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from ...facts import fact_value
from ...model import Fact
from ..config import hparams

__all__ = ["CONFIG", "UNPARSED", "config_facts", "literal_config"]

#: The config dump's name in ``vis_data/``.
CONFIG = "config.py"
#: Optimizer wrappers whose accumulation defaults to 1 (mmengine's OptimWrapper and its
#: mixed-precision subclass; another wrapper type may count differently).
_PLAIN_WRAPPERS = (None, "OptimWrapper", "AmpOptimWrapper")


class _Unparsed:
    """Stands for a value in the config that is not a literal (kept, so that a key set to
    code is not mistaken for a key left out)."""

    def __repr__(self) -> str:
        return "<not a literal>"


UNPARSED = _Unparsed()


def literal_config(text: str) -> dict[str, Any]:
    """The top-level assignments of a config dump, their values read where they are literals
    or ``dict(...)`` calls and :data:`UNPARSED` where not; {} for a file that is not Python.

    >>> literal_config("a = dict(b=1, c=[2, (3, )], d=f(x))\\ne = dict({0: 'x'}, k=-0.5)")
    {'a': {'b': 1, 'c': [2, [3]], 'd': <not a literal>}, 'e': {0: 'x', 'k': -0.5}}
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
            except RecursionError:
                out[node.targets[0].id] = UNPARSED
    return out


def _value(node: ast.expr) -> Any:
    """The literal value of ``node``, or :data:`UNPARSED`."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_value(item) for item in node.elts]
        return UNPARSED if any(item is UNPARSED for item in items) else items
    if isinstance(node, ast.Dict):
        keys = [UNPARSED if key is None else _value(key) for key in node.keys]
        if any(key is UNPARSED or isinstance(key, (list, dict)) for key in keys):
            return UNPARSED
        return {key: _value(item) for key, item in zip(keys, node.values)}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        base = _value(node.args[0]) if len(node.args) == 1 else {} if not node.args else UNPARSED
        if not isinstance(base, dict) or any(word.arg is None for word in node.keywords):
            return UNPARSED
        return {**base, **{word.arg: _value(word.value) for word in node.keywords}}
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)
            and isinstance(node.operand.value, (int, float))):
        return -node.operand.value
    return UNPARSED


def _plain(config: Any) -> Any:
    """``config`` without the values that are not literals."""
    if isinstance(config, dict):
        return {key: _plain(value) for key, value in config.items() if value is not UNPARSED}
    return config


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
    if config.get("launcher") == "none":
        facts["world_size"] = Fact(1, f"{where}: launcher 'none' (not distributed: one "
                                      "process on one device)", "config")
    return facts, hparams(_plain(config), where=where)


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
