"""Analysis of runs on a common axis: summary numbers and comparisons."""

from .compare import Comparison, compare

__all__ = ["Comparison", "compare"]
