"""The report's headline and the terminal's first lines: the comparison's verdict in words
(:class:`~runcompare.analysis.verdict.Verdict`), the same text as ``--json`` carries."""

from __future__ import annotations

from ..analysis import Comparison
from ..display import fmt

__all__ = ["verdict", "where"]


def verdict(comparison: Comparison) -> str:
    """The verdict's text, e.g. "At 102,400 tokens mamba is ahead on eval/loss by 0.017
    (0.8%): 2.187 against attn's 2.204 (lower is better). That margin is within the noise ..."."""
    return str(comparison)


def where(x: str, value: float) -> str:
    """A point on an axis in words.

    >>> where("tokens", 102400.0), where("step", 20.0), where("elapsed", 8.5)
    ('after 102,400 tokens', 'at step 20', 'after 8.5 s')
    """
    phrases = {"step": "at step {}", "micro_step": "at micro-step {}", "epoch": "at epoch {}",
               "samples": "after {} samples", "tokens": "after {} tokens",
               "elapsed": "after {} s", "wall_time": "at unix time {}",
               "flops": "after {} FLOPs", "device_hours": "after {} device-hours"}
    return phrases.get(x, f"at {x} {{}}").format(fmt(value))
