"""runcompare: compare ML training runs on a fair axis. ::

    import runcompare as rc
    runs = rc.load_many(["sample_logs/mamba", "sample_logs/attn"])
    runs[0].frame(x="tokens")            # polars; runs[0].to_pandas(x="tokens") for pandas
    rc.compare(runs).summary
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .analysis import Comparison, compare
from .analysis.critical_batch import CriticalBatch, critical_batch
from .analysis.goodput import Goodput, goodput
from .analysis.noise_scale import NoiseScale, noise_scale
from .analysis.plan import Plan, plan
from .batch import BatchPlan, plan_batch
from .errors import (
    InputError,
    MissingInfoError,
    NoLogsFoundError,
    RuncompareError,
    UnknownMetricError,
    UsageError,
)
from .load import load, load_many
from .model import BatchConfig, Fact, Finding, RawLog, Run

try:
    __version__ = version("runcompare")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

__all__ = [
    "BatchConfig",
    "BatchPlan",
    "Comparison",
    "CriticalBatch",
    "Fact",
    "Finding",
    "Goodput",
    "InputError",
    "MissingInfoError",
    "NoLogsFoundError",
    "NoiseScale",
    "Plan",
    "RawLog",
    "Run",
    "RuncompareError",
    "UnknownMetricError",
    "UsageError",
    "__version__",
    "compare",
    "critical_batch",
    "goodput",
    "load",
    "load_many",
    "noise_scale",
    "plan",
    "plan_batch",
]
