"""The report's first line: who reaches the target first on the compared axis, by how much,
and whether the comparison is fair."""

from __future__ import annotations

from ..analysis import Comparison
from ..analysis.summary import higher_is_better
from ..display import fmt

__all__ = ["verdict"]


def verdict(comparison: Comparison) -> str:
    """Plain text, e.g. "attn reaches eval/loss ≤ 2.204 first, after 51,200 tokens: 2.00×
    sooner than mamba (after 102,400 tokens). No fairness warnings: ..."."""
    return f"{_race(comparison)} {_fairness(comparison)}"


def _race(comparison: Comparison) -> str:
    metric, x = comparison.main, comparison.x
    if metric is None:
        return "The runs share no metric to compare."
    rows = comparison.summary.filter(metric=metric).drop_nulls("x_to_target") \
        .sort("x_to_target", maintain_order=True)
    if rows.is_empty():
        return f"No run reaches the target on {metric}."
    sign = "≥" if higher_is_better(metric) else "≤"
    target = rows.get_column("target")[0]
    first, x_first = rows.get_column("run")[0], rows.get_column("x_to_target")[0]
    text = f"{first} reaches {metric} {sign} {fmt(target)} first, {where(x, x_first)}"
    if rows.height < 2:
        return f"{text}; no other run reaches it."
    second, x_second = rows.get_column("run")[1], rows.get_column("x_to_target")[1]
    if x_second == x_first:
        return f"{text}, tied with {second}."
    ratio = x_second / x_first if x_first else float("inf")
    return f"{text}: {ratio:.2f}× sooner than {second} ({where(x, x_second)})."


def where(x: str, value: float) -> str:
    """A point on an axis in words.

    >>> where("tokens", 102400.0), where("step", 20.0), where("elapsed", 8.5)
    ('after 102,400 tokens', 'at step 20', 'after 8.5 s')
    """
    phrases = {"step": "at step {}", "micro_step": "at micro-step {}", "epoch": "at epoch {}",
               "samples": "after {} samples", "tokens": "after {} tokens",
               "elapsed": "after {} s", "wall_time": "at unix time {}"}
    return phrases.get(x, f"at {x} {{}}").format(fmt(value))


def _fairness(comparison: Comparison) -> str:
    warnings = [f for f in comparison.finding_list if f.level in ("warning", "error")]
    if not warnings:
        return f"No fairness warnings: {comparison.x} is a fair axis for these runs."
    codes = ", ".join(sorted({f.code for f in warnings}))
    return (f"Not a fair comparison as it stands: {len(warnings)} warning"
            f"{'s' if len(warnings) > 1 else ''} below ({codes}).")
