"""What differs between runs: the hyperparameters (every configuration key the runs' sources
hold, ``Run.hparams``) whose value is not the same in every run.

Values are compared as :func:`~runcompare.sources.config.comparable` makes them (MLflow's
``"0.001"`` equals W&B's ``0.001``). A key differs when the runs that hold it hold two or more
values (the runs that lack it show no value: their logs do not say, which is not a
difference). A key only some runs hold, all with one value, is only listed
(:attr:`Differences.partial`): one source more (a W&B config beside TensorBoard) adds dozens.
Keys that name or place a run rather than set how it trains (``output_dir``, ``run_name``,
...) differ in every sweep; they are kept apart (:attr:`Differences.identity`) so the table
shows the settings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..facts import CONFIG_KEYS, comparable
from ..model import Fact, Run

__all__ = ["BATCH_KEYS", "IDENTITY_KEYS", "Difference", "Differences", "differences"]

#: Last components of keys that name or place a run (its folder, its name, its id).
IDENTITY_KEYS = frozenset({
    "output_dir", "logging_dir", "log_dir", "logdir", "save_dir", "dir", "run_name", "run_id",
    "exp_name", "experiment_name", "hub_model_id", "wandb_run_name", "output_path",
    "checkpoint_dir", "ckpt_dir", "default_root_dir", "name", "id"})

#: Configuration keys of the batch hierarchy's facts (shown in the hierarchy already).
BATCH_KEYS = frozenset(key for name in ("per_device_batch", "grad_accum", "world_size",
                                        "seq_len", "global_batch", "tokens_per_step")
                       for key in CONFIG_KEYS[name])


@dataclass(frozen=True)
class Difference:
    """One key whose value is not the same in every run: each run's fact (None where the
    run's sources hold no such key)."""

    key: str
    facts: dict[str, Fact[Any] | None]

    @property
    def everywhere(self) -> bool:
        """Whether every run holds the key (then only the values differ)."""
        return all(fact is not None for fact in self.facts.values())

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key,
                "values": {run: None if f is None else f.value for run, f in self.facts.items()},
                "sources": {run: None if f is None else f.source
                            for run, f in self.facts.items()}}


@dataclass(frozen=True)
class Differences:
    """The keys that differ (those every run holds first, each part in key order); apart, the
    identity keys (names and paths) that differ, and the keys only some runs hold, with one
    value."""

    keys: list[Difference] = field(default_factory=list)
    identity: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.keys)

    def settings(self) -> list[Difference]:
        """The differences that are not batch-hierarchy keys (for a table beside the
        hierarchy)."""
        return [d for d in self.keys if d.key.rsplit(".", 1)[-1] not in BATCH_KEYS]

    def to_json(self) -> dict[str, Any]:
        return {"keys": [d.to_json() for d in self.keys], "identity": self.identity,
                "partial": self.partial}


def differences(runs: Sequence[Run]) -> Differences:
    """The hyperparameters whose value is not the same in every one of ``runs`` (none for a
    single run).

    >>> from types import SimpleNamespace as R
    >>> a = R(name="a", hparams={"lr": Fact(1e-3, "x: lr"), "output_dir": Fact("/a", "x"),
    ...                          "wd": Fact(0.1, "x: wd")})
    >>> b = R(name="b", hparams={"lr": Fact("0.003", "y: lr"), "output_dir": Fact("/b", "y")})
    >>> found = differences([a, b])
    >>> [(d.key, {r: f.value for r, f in d.facts.items()}) for d in found.keys]
    [('lr', {'a': 0.001, 'b': '0.003'})]
    >>> found.identity, found.partial
    (['output_dir'], ['wd'])
    """
    if len(runs) < 2:
        return Differences()
    keys = sorted({key for run in runs for key in run.hparams})
    found, identity, partial = [], [], []
    for key in keys:
        facts = {run.name: run.hparams.get(key) for run in runs}
        values = {_hashable(comparable(f.value)) for f in facts.values() if f is not None}
        if len(values) < 2:
            if None in facts.values():
                partial.append(key)
        elif key.rsplit(".", 1)[-1] in IDENTITY_KEYS:
            identity.append(key)
        else:
            found.append(Difference(key, facts))
    found.sort(key=lambda d: not d.everywhere)  # stable: key order within each part
    return Differences(found, identity, partial)


def _hashable(value: Any) -> Any:
    """NaN never equals itself: compare it as its text."""
    return "nan" if isinstance(value, float) and math.isnan(value) else value
