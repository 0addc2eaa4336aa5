"""A sweep's parallel-coordinates chart: one axis per hyperparameter that differs between the
runs (numbers on their own scale, text and true/false as the values they take), the verdict's
metric at the common budget last, one line per run coloured by that metric.

Only keys every ranked run holds are drawn (a line cannot pass through a missing value); the
chart says how many it left out. At most :data:`AXES` keys, in the order of
:meth:`~runcompare.analysis.differs.Differences.settings` (then the batch keys).
"""

from __future__ import annotations

from typing import Any

from ..analysis import Comparison
from ..facts import comparable

__all__ = ["AXES", "parcoords"]

#: Hyperparameter axes drawn at most (plus the metric's).
AXES = 12


def parcoords(comparison: Comparison) -> dict[str, Any] | None:
    """The chart's data for the page (``data.parcoords``), or None when there is nothing to
    draw: no verdict value, or no differing key that every ranked run holds."""
    verdict = comparison.verdict
    values = verdict.run_values if verdict is not None else {}
    if verdict is None or not values or not comparison.differs:
        return None
    runs = list(values)
    settings = comparison.differs.settings()
    ordered = settings + [d for d in comparison.differs.keys if d not in settings]
    held = [d for d in ordered if all(d.facts.get(run) is not None for run in runs)]
    facts = {d.key: {run: fact for run in runs if (fact := d.facts.get(run)) is not None}
             for d in held}
    drawn = held[:AXES]
    if not drawn:
        return None
    dimensions = [_dimension(d.key, [comparable(facts[d.key][run].value) for run in runs])
                  for d in drawn]
    metric = [values[run] for run in runs]
    dimensions.append({"label": f"{verdict.metric} at the budget", "values": metric})
    return {"runs": runs, "dimensions": dimensions, "color": metric,
            "metric": verdict.metric, "left_out": len(ordered) - len(drawn)}


def _dimension(key: str, values: list[Any]) -> dict[str, Any]:
    """Numbers as they are; anything else as the index of its value among the values taken
    (sorted as text), with those values as the axis's tick labels.

    >>> _dimension("optim", ["adamw", "sgd", "adamw"])
    {'label': 'optim', 'values': [0, 1, 0], 'tickvals': [0, 1], 'ticktext': ['adamw', 'sgd']}
    >>> _dimension("lr", [0.001, 0.003])
    {'label': 'lr', 'values': [0.001, 0.003]}
    """
    if all(isinstance(v, float) for v in values):
        return {"label": key, "values": values}
    taken = sorted({str(v) for v in values})
    return {"label": key, "values": [taken.index(str(v)) for v in values],
            "tickvals": list(range(len(taken))), "ticktext": taken}
