"""The one metric-name canonicaliser: a logged key to runcompare's name (HF's TensorBoard
naming: ``train/loss``, ``eval/loss``, ``train/learning_rate``, ...).

Every format names its keys with :func:`canonical_names` (or :func:`canonical` for one key)
and a :class:`Dialect`, the table of how its writer spells sections and names; the steps are
the same for all:

1. ``fold`` (printed logs): lower case, spaces and hyphens to ``_``;
2. ``patterns``: whole keys that mean one metric (``lr-AdamW``, Lightning's LR monitor);
3. ``renames``: whole keys spelled another way (``lr`` -> ``learning_rate``);
4. the section: a known prefix before the first separator (``eval_``, ``val/``) names it;
   without one a key holding ``/`` is kept as it is (already a path), any other is ``train/``;
5. ``suffixes``: a section's suffix dropped (Lightning's ``_step`` on train metrics).

When two keys of one log come to the same name, the one that needed no rename or suffix keeps
it and the others keep the name without those steps (``loss`` and ``train_loss`` printed on
one line are ``train/loss`` and ``train/train_loss``); keys that still collide keep the name as
logged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["LIGHTNING", "PRINTED", "TRAINER", "Dialect", "canonical", "canonical_names"]


@dataclass(frozen=True)
class Dialect:
    """How one writer spells its keys (see the module docstring for the steps)."""

    #: Logged prefix -> section (``val`` -> ``eval``).
    sections: Mapping[str, str]
    #: Characters that end a prefix.
    separators: str = "_"
    #: Prefixes matched in any case (``Val_loss``).
    any_case: bool = False
    fold: bool = False
    #: (regular expression matching the whole key, canonical name).
    patterns: tuple[tuple[str, str], ...] = ()
    renames: Mapping[str, str] = field(default_factory=dict)
    #: Section -> suffix dropped from its names (kept when it is the whole name).
    suffixes: Mapping[str, str] = field(default_factory=dict)


#: The HF Trainer (``log_history`` keys, its stdout dicts, its MLflow and W&B keys).
TRAINER = Dialect(sections={"eval": "eval", "test": "test"})

#: Hand-written loops' printed ``key=value`` / ``key: value`` pairs.
PRINTED = Dialect(
    sections={"eval": "eval", "test": "test", "val": "eval", "valid": "eval"}, fold=True,
    renames={"lr": "learning_rate", "val_loss": "eval_loss", "valid_loss": "eval_loss",
             "validation_loss": "eval_loss", "train_loss": "loss", "gnorm": "grad_norm"})

#: Lightning's ``self.log`` names (``train_loss_step``, ``val_acc_epoch``, ``lr-AdamW``).
LIGHTNING = Dialect(
    sections={"train": "train", "training": "train", "val": "eval", "valid": "eval",
              "validation": "eval", "eval": "eval", "test": "test"},
    separators="_/", any_case=True,
    patterns=((r"lr-[A-Za-z0-9_]+|lr|learning_rate", "train/learning_rate"),),
    suffixes={"train": "_step", "eval": "_epoch", "test": "_epoch"})


def canonical(key: str, dialect: Dialect = TRAINER, *, plain: bool = False) -> str:
    """The canonical name of ``key``; ``plain`` skips renames and suffixes.

    >>> canonical("eval_loss"), canonical("loss"), canonical("test_acc"), canonical("train_loss")
    ('eval/loss', 'train/loss', 'test/acc', 'train/train_loss')
    >>> [canonical(k, PRINTED) for k in ("loss", "lr", "val_loss", "val_acc", "eval/bleu", "Loss")]
    ['train/loss', 'train/learning_rate', 'eval/loss', 'eval/acc', 'eval/bleu', 'train/loss']
    >>> [canonical(k, LIGHTNING) for k in ("train_loss_step", "train_loss_epoch", "val_loss",
    ...                                    "val_acc_epoch", "test/acc", "lr-AdamW", "loss")]
    ... # doctest: +NORMALIZE_WHITESPACE
    ['train/loss', 'train/loss_epoch', 'eval/loss', 'eval/acc', 'test/acc',
     'train/learning_rate', 'train/loss']
    """
    if dialect.fold:
        key = key.strip().lower().replace(" ", "_").replace("-", "_")
    for pattern, name in dialect.patterns:
        if re.fullmatch(pattern, key):
            return name
    if not plain:
        key = dialect.renames.get(key, key)
    section, rest = _section(key, dialect)
    if section is None:
        return key if "/" in key else f"train/{key}"
    suffix = dialect.suffixes.get(section, "")
    if not plain and suffix and rest.endswith(suffix) and len(rest) > len(suffix):
        rest = rest[:-len(suffix)]
    return f"{section}/{rest}"


def canonical_names(keys: Iterable[str], dialect: Dialect = TRAINER) -> dict[str, str]:
    """Logged key -> canonical name, collisions settled as the module docstring says.

    >>> canonical_names(["loss", "train_loss", "lr"], PRINTED)
    {'loss': 'train/loss', 'train_loss': 'train/train_loss', 'lr': 'train/learning_rate'}
    """
    keys = list(dict.fromkeys(keys))
    names = {key: canonical(key, dialect) for key in keys}
    taken: dict[str, list[str]] = {}
    for key, name in names.items():
        taken.setdefault(name, []).append(key)
    for name, owners in taken.items():
        if len(owners) < 2:
            continue
        plain = [key for key in owners if canonical(key, dialect, plain=True) == name]
        for key in owners:
            if key not in plain[:1] or len(plain) > 1:
                names[key] = canonical(key, dialect, plain=True)
    counts: dict[str, int] = {}
    for name in names.values():
        counts[name] = counts.get(name, 0) + 1
    return {key: name if counts[name] == 1 else key for key, name in names.items()}


def _section(key: str, dialect: Dialect) -> tuple[str | None, str]:
    """The section a key's prefix names, and the rest of the key; (None, key) without one."""
    match = re.match(rf"([A-Za-z]+)[{re.escape(dialect.separators)}](.+)", key)
    if match is None:
        return None, key
    head = match.group(1).lower() if dialect.any_case else match.group(1)
    section = dialect.sections.get(head)
    return (section, match.group(2)) if section else (None, key)
