"""The verdict at a glance: one headline sentence and a few key numbers.

The headline (at most :data:`WORDS` words) says who leads, by how much, where, and the call;
a sweep's names the best run and the spread, never a list of runs. The key numbers
(:func:`key_numbers`, three to five of them where the logs have them) are the difference with
its 95% band, the race to the target, and the wall-clock and FLOPs ratios to the budget. The
report shows them above its first chart, the terminal in its first lines, ``--json`` as the
verdict's ``headline`` and ``key_numbers``; the verdict's full text follows below them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..display import fmt
from .summary import higher_is_better
from .wording import at, flops, percent, ratio

if TYPE_CHECKING:
    from .verdict import Verdict

__all__ = ["WORDS", "headline", "key_numbers"]

#: The most words a headline has.
WORDS = 25

#: The call in the headline's words.
_CALLS = {"clear": "a clear lead across seeds",
          "unreplicated": "beyond the runs' own noise, but unreplicated",
          "within-noise": "within the noise, a tie",
          "not-comparable": "not comparable as it stands"}


def _at(axis: str, value: float) -> str:
    """Where on an axis, in a sentence's middle ("at 102,400 tokens", "after 8.5 s of
    wall-clock")."""
    where = at(axis, value)
    return where[0].lower() + where[1:]


def headline(verdict: Verdict) -> str:
    """One sentence of at most :data:`WORDS` words (see the module)."""
    values = verdict.values
    if verdict.metric is None or len(values) < 2 or verdict.leader is None:
        first = verdict.text.split(". ")[0].split(" (")[0].rstrip(".")
        return _cap(f"No verdict: {first[0].lower() + first[1:] if first else 'no runs'}.")
    names = list(values)
    leader, runner = names[0], names[1]
    where = _at(verdict.axis, verdict.budget) if verdict.budget is not None else ""
    call = _CALLS.get(verdict.call, verdict.call)
    if verdict.schedule is not None:
        call = "no call, the learning-rate schedules stand at different points"
    gap = f"{percent(verdict.relative)}" if verdict.relative is not None else \
        fmt(verdict.difference or 0.0)
    if len(names) > 2:
        spread = f"{fmt(values[leader])} to {fmt(values[names[-1]])}"
        return _cap(f"Best of {len(names)}: {leader} on {verdict.metric} {where} ({spread}), "
                    f"{gap} ahead of {runner}: {call}.")
    if not verdict.difference:
        return _cap(f"{leader} and {runner} are level on {verdict.metric} {where}.")
    return _cap(f"{leader} leads {runner} on {verdict.metric} by {gap} {where}: {call}.")


def _cap(text: str) -> str:
    """At most :data:`WORDS` words (a long run name counts as one)."""
    words = text.split()
    return text if len(words) <= WORDS else " ".join(words[:WORDS - 1]) + " …"


def key_numbers(verdict: Verdict) -> list[dict[str, str]]:
    """The key numbers: each a ``label``, a ``value`` and a ``detail`` (see the module)."""
    if verdict.metric is None or verdict.leader is None or len(verdict.values) < 2:
        return []
    cards = [_difference(verdict)]
    cards += [c for c in (_race(verdict), _cost(verdict, "elapsed", "wall-clock", "less"),
                          _cost(verdict, "flops", "training FLOPs", "fewer")) if c]
    if len(verdict.values) > 2:
        values = list(verdict.values.values())
        cards.append({"label": "runs", "value": f"{len(values)}",
                      "detail": f"{verdict.metric} from {fmt(values[0])} to {fmt(values[-1])}"})
    return cards[:5]


def _difference(verdict: Verdict) -> dict[str, str]:
    names = list(verdict.values)
    noise = verdict.noise or {}
    band = ""
    if noise.get("kind") == "seeds":
        low, high = noise["interval"]
        band = f"; 95% interval {low:.3g} to {high:.3g} across seeds"
    elif noise.get("half_width") is not None:
        band = f"; the runs' own noise ±{noise['half_width']:.2g} at 95%"
    way = "higher" if higher_is_better(verdict.metric or "") else "lower"
    value = percent(verdict.relative) if verdict.relative is not None else \
        fmt(verdict.difference or 0.0)
    return {"label": f"{verdict.metric} difference", "value": value,
            "detail": f"{names[0]} {verdict.difference or 0.0:.2g} {way} than "
                      f"{names[1]}{band}"}


def _race(verdict: Verdict) -> dict[str, str] | None:
    speedup = verdict.race.get("speedup")
    goal = verdict.race.get("target")
    if not speedup or goal is None:
        return None
    sign = "≥" if higher_is_better(verdict.metric or "") else "≤"
    interval = speedup.get("interval")
    detail = f"{verdict.metric} {sign} {fmt(goal)} on {verdict.axis}"
    if interval:
        detail += f"; 95% interval {interval[0]:.2f}× to {interval[1]:.2f}×"
    return {"label": "to the target", "value": f"{speedup['faster']} {ratio(speedup['value'])} "
            "sooner", "detail": detail}


def _cost(verdict: Verdict, key: str, what: str, less: str) -> dict[str, str] | None:
    names = list(verdict.values)[:2]
    costs = [verdict.cost.get(n, {}).get(key) for n in names]
    if not all(costs):
        return None
    pairs: list[Any] = sorted(zip(names, costs), key=lambda item: item[1])
    (cheap, low), (_dear, high) = pairs
    shown = [flops(c) if key == "flops" else f"{c:.3g} s" for c in costs]
    detail = f"to the budget: {names[0]} {shown[0]}, {names[1]} {shown[1]}"
    if high / low < 1.01:
        return {"label": what, "value": "about the same", "detail": detail}
    return {"label": what, "value": f"{ratio(high / low)} {less} for {cheap}", "detail": detail}
